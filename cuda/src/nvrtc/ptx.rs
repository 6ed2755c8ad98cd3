//! [`Ptx`]: the text NVRTC produces and the driver loads.

use std::ffi::{CStr, CString};

use ferrocoll_core::{Error, Result};

/// PTX assembly text: valid UTF-8 without NUL bytes, so it can be handed to
/// the driver as a C string ([`Module::load_ptx`](crate::Module::load_ptx))
/// and written to or read from a file as it is.
///
/// ```
/// let ptx = ferrocoll_cuda::Ptx::from_src(".version 9.0\n.target sm_90\n")?;
/// assert!(ptx.as_str().starts_with(".version"));
/// assert!(ferrocoll_cuda::Ptx::from_src("a\0b").is_err());
/// # Ok::<(), ferrocoll_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ptx(CString);

impl Ptx {
    /// PTX from its text (read from a file, say); `InvalidParam` if it holds a NUL byte.
    pub fn from_src(src: impl Into<String>) -> Result<Ptx> {
        CString::new(src.into())
            .map(Ptx)
            .map_err(|e| Error::invalid_param(format!("PTX text has a NUL byte at offset {}", e.nul_position())))
    }

    /// PTX from NVRTC's output buffer: the text up to its terminating NUL.
    pub(crate) fn from_image(mut image: Vec<u8>) -> Result<Ptx> {
        if let Some(end) = image.iter().position(|&b| b == 0) {
            image.truncate(end);
        }
        let text = String::from_utf8(image).map_err(|e| {
            Error::internal(format!("NVRTC's PTX is not UTF-8 at byte {}", e.utf8_error().valid_up_to()))
        })?;
        Ptx::from_src(text)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // A Ptx is only made from a String (from_src), so its bytes are UTF-8
        // and the fallback is never taken.
        self.0.to_str().unwrap_or_default()
    }

    /// The text as an owned `String`.
    pub fn to_src(&self) -> String {
        self.as_str().to_owned()
    }

    /// The text as a C string, for the driver.
    pub fn as_c_str(&self) -> &CStr {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_stop_at_their_nul_and_must_be_text() {
        let ptx = Ptx::from_image(b".version 9.0\n\0garbage".to_vec()).unwrap();
        assert_eq!(ptx.as_str(), ".version 9.0\n");
        assert_eq!(ptx.as_c_str().to_bytes(), b".version 9.0\n");
        assert_eq!(Ptx::from_image(b"no nul".to_vec()).unwrap().to_src(), "no nul");
        assert!(Ptx::from_image(vec![0xff, 0xfe]).is_err());
        let e = Ptx::from_src("ab\0c").unwrap_err();
        assert!(e.to_string().contains("offset 2"), "{e}");
    }
}
