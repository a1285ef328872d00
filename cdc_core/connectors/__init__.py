"""One sub-package per source database (log reader, chunk-query dialect, type mapping,
watermark writer). The generic core talks to them only through the interfaces it defines.
"""
