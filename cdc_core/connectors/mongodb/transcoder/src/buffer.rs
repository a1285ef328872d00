//! The bytes of a Python buffer, borrowed while it lives.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The bytes of a Python object with the buffer protocol (`bytes`, or the `memoryview`
/// pymongo gives for a document of 4 KiB or more).
pub enum Buffer<'py> {
    Bytes(Bound<'py, PyBytes>),
    View(PyBuffer<u8>),
}

impl<'py> Buffer<'py> {
    pub fn of(object: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(bytes) = object.cast::<PyBytes>() {
            return Ok(Buffer::Bytes(bytes.clone()));
        }
        let view = PyBuffer::<u8>::get(object)?;
        if !view.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "a change event's buffer that is not contiguous",
            ));
        }
        Ok(Buffer::View(view))
    }

    pub fn bytes(&self) -> &[u8] {
        match self {
            Buffer::Bytes(bytes) => bytes.as_bytes(),
            // SAFETY: a contiguous buffer of `len_bytes` bytes, held (and so kept alive and
            // unmoved) while `self` lives; read only.
            Buffer::View(view) => unsafe {
                std::slice::from_raw_parts(view.buf_ptr() as *const u8, view.len_bytes())
            },
        }
    }
}
