//! TensorBoard's event-file format, the part attnres writes: a file of TFRecord records,
//! each an `Event` protocol buffer holding a step's scalars.
//!
//! A record is `length: u64 LE`, `masked_crc32c(length bytes): u32 LE`, the bytes, and
//! `masked_crc32c(bytes): u32 LE`; TensorBoard's reader checks both checksums. Only four
//! messages are needed (`Event`, `Summary`, `Summary.Value`, `SessionLog`), so they are
//! encoded here by hand in a few lines instead of through a protobuf code generator. The
//! checksum is the `crc32c` crate's (hardware CRC where the CPU has it).
//! `tests/tensorboard.rs` reads the files back with TensorBoard's own reader.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::StoreError;

/// The first event of every file: the format version TensorBoard expects.
const FILE_VERSION: &str = "brain.Event:2";

/// An event file being appended to. Each event goes to the OS in one `write`, so a killed
/// process loses at most the event it was writing (a torn record ends the file for readers).
pub struct EventFile {
    path: PathBuf,
    file: fs::File,
}

impl EventFile {
    /// Creates `dir/events.out.tfevents.SECONDS.HOST.PID` and writes its version event.
    pub fn create(dir: &Path, wall_time: f64) -> Result<Self, StoreError> {
        fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
        let host = fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        let name = format!(
            "events.out.tfevents.{:010}.{host}.{}",
            wall_time as u64,
            std::process::id()
        );
        let path = dir.join(name);
        let file = fs::File::create(&path).map_err(|e| StoreError::io(&path, e))?;
        let mut events = Self { path, file };
        let mut body = Vec::new();
        bytes_field(&mut body, 3, FILE_VERSION.as_bytes());
        events.write_event(wall_time, 0, &body)?;
        Ok(events)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One event at `step` holding every `(tag, value)` as a scalar.
    pub fn scalars(
        &mut self,
        step: u64,
        wall_time: f64,
        values: &[(String, f32)],
    ) -> Result<(), StoreError> {
        let mut summary = Vec::new();
        for (tag, value) in values {
            let mut v = Vec::new();
            bytes_field(&mut v, 1, tag.as_bytes());
            key(&mut v, 2, WIRE_FIXED32);
            v.extend_from_slice(&value.to_le_bytes());
            bytes_field(&mut summary, 1, &v);
        }
        let mut body = Vec::new();
        bytes_field(&mut body, 5, &summary);
        self.write_event(wall_time, step, &body)
    }

    /// A `SessionLog` START at `step`: TensorBoard drops what it had already read at this
    /// step and later, which is how a restarted run's superseded points leave a live view.
    pub fn session_start(&mut self, step: u64, wall_time: f64) -> Result<(), StoreError> {
        let mut log = Vec::new();
        key(&mut log, 1, WIRE_VARINT);
        varint(&mut log, 1); // SessionLog.START
        let mut body = Vec::new();
        bytes_field(&mut body, 6, &log);
        self.write_event(wall_time, step, &body)
    }

    fn write_event(&mut self, wall_time: f64, step: u64, body: &[u8]) -> Result<(), StoreError> {
        let mut event = Vec::with_capacity(body.len() + 16);
        key(&mut event, 1, WIRE_FIXED64);
        event.extend_from_slice(&wall_time.to_le_bytes());
        key(&mut event, 2, WIRE_VARINT);
        varint(&mut event, step);
        event.extend_from_slice(body);
        self.file
            .write_all(&record(&event))
            .map_err(|e| StoreError::write(&self.path, e))
    }
}

const WIRE_VARINT: u8 = 0;
const WIRE_FIXED64: u8 = 1;
const WIRE_LEN: u8 = 2;
const WIRE_FIXED32: u8 = 5;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    key(out, field, WIRE_LEN);
    varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// The TFRecord framing of `data`.
fn record(data: &[u8]) -> Vec<u8> {
    let length = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&length);
    out.extend_from_slice(&masked_crc(&length).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
    out
}

/// TFRecord's masked CRC-32C: rotated right by 15 bits plus a constant, so that a CRC
/// stored inside checksummed data does not checksum to a fixed value.
fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_is_castagnoli_and_masked_as_tfrecord_masks_it() {
        // The CRC-32C check value (RFC 3720, "123456789").
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        // TensorFlow's mask, ((crc >> 15) | (crc << 17)) + 0xa282ead8, worked by hand.
        assert_eq!(masked_crc(b"123456789"), 0xc78a_b0e5);
    }

    #[test]
    fn varints_are_little_endian_base_128() {
        let encode = |v| {
            let mut out = Vec::new();
            varint(&mut out, v);
            out
        };
        assert_eq!(encode(1), [1]);
        assert_eq!(encode(300), [0xac, 0x02]);
        assert_eq!(encode(u64::MAX).len(), 10);
    }

    #[test]
    fn records_frame_their_bytes_with_length_and_both_checksums() {
        let framed = record(b"abc");
        assert_eq!(framed.len(), 8 + 4 + 3 + 4);
        assert_eq!(u64::from_le_bytes(framed[..8].try_into().unwrap()), 3);
        assert_eq!(
            u32::from_le_bytes(framed[8..12].try_into().unwrap()),
            masked_crc(&framed[..8])
        );
        assert_eq!(&framed[12..15], b"abc");
        assert_eq!(
            u32::from_le_bytes(framed[15..].try_into().unwrap()),
            masked_crc(b"abc")
        );
    }

    #[test]
    fn a_scalar_event_encodes_wall_time_step_and_a_tagged_float() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = EventFile::create(dir.path(), 1.5).unwrap();
        file.scalars(7, 2.0, &[("loss/train".into(), 0.25)])
            .unwrap();
        let bytes = fs::read(file.path()).unwrap();
        // Skip the version event's record, then unframe the scalar event.
        let first = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize + 16;
        let event = &bytes[first + 12..bytes.len() - 4];
        let mut expected = vec![0x09];
        expected.extend_from_slice(&2.0f64.to_le_bytes());
        expected.extend_from_slice(&[0x10, 7, 0x2a, 19, 0x0a, 17, 0x0a, 10]);
        expected.extend_from_slice(b"loss/train");
        expected.push(0x15);
        expected.extend_from_slice(&0.25f32.to_le_bytes());
        assert_eq!(event, expected.as_slice());
    }
}
