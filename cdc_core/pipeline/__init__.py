"""The streamer: log reader → bounded queue → dispatcher (the one door) → sink → offsets."""
