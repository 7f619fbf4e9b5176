//! Reading a sweep or RunSpec file: only a regular file, at most [`MAX_BYTES`], UTF-8 with or
//! without a byte-order mark. Each refusal names the file and says what to do.

use std::io::Read;
use std::path::Path;

use super::SpecError;

/// The largest sweep file read: far above any real sweep, far below a mistaken device.
pub const MAX_BYTES: u64 = 16 << 20;

/// The file's text, without a leading byte-order mark.
pub fn read_text(path: &Path) -> Result<String, SpecError> {
    let refuse = |message: String, location: Option<(usize, usize)>| SpecError {
        key: String::new(),
        message,
        file: Some(path.to_path_buf()),
        location,
    };
    let meta =
        std::fs::metadata(path).map_err(|e| refuse(format!("cannot read this file: {e}"), None))?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a folder"
        } else {
            "not a regular file (a FIFO, socket or device)"
        };
        return Err(refuse(
            format!("is {what}; give the path of a YAML file"),
            None,
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| refuse(format!("cannot read this file: {e}"), None))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(refuse(
            format!(
                "is over {} MiB, too large for a sweep or RunSpec file; is it the right file?",
                MAX_BYTES >> 20
            ),
            None,
        ));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = good
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        let column = String::from_utf8_lossy(&good[line_start..]).chars().count() + 1;
        refuse(
            format!(
                "is not UTF-8 text (byte 0x{:02x}); save it as UTF-8",
                e.as_bytes()[good.len()]
            ),
            Some((line, column)),
        )
    })?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("attnres-read-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn a_file_over_the_cap_is_refused_after_reading_the_cap() {
        let path = scratch("big", &vec![b'#'; (MAX_BYTES + 1) as usize]);
        let err = read_text(&path).unwrap_err();
        assert!(err.to_string().contains("is over 16 MiB"), "{err}");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_byte_order_mark_is_dropped() {
        let path = scratch("bom", b"\xef\xbb\xbfname: x\n");
        assert_eq!(read_text(&path).unwrap(), "name: x\n");
    }

    #[test]
    fn bad_bytes_are_located() {
        let path = scratch("latin1", b"name: x\ndescription: caf\xe9\n");
        let err = read_text(&path).unwrap_err();
        assert_eq!(err.location, Some((2, 17)), "{err}");
        assert!(err.to_string().contains("0xe9"), "{err}");
    }

    #[test]
    fn folders_and_devices_are_refused_without_reading() {
        let err = read_text(Path::new("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let err = read_text(&std::env::temp_dir()).unwrap_err();
        assert!(err.to_string().contains("is a folder"), "{err}");
    }
}
