//! Little-endian byte helpers shared by device memory, the functional core and textures
//! (a leaf: it depends on nothing else in the crate).

/// Little-endian load of up to 8 bytes.
#[inline]
pub fn read_le(bytes: &[u8]) -> u64 {
    // The common widths as fixed-size reads: a variable-length copy is a `memcpy` call.
    match *bytes {
        [a] => u64::from(a),
        [a, b] => u64::from(u16::from_le_bytes([a, b])),
        [a, b, c, d] => u64::from(u32::from_le_bytes([a, b, c, d])),
        [a, b, c, d, e, f, g, h] => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
        _ => {
            let mut b = [0u8; 8];
            b[..bytes.len()].copy_from_slice(bytes);
            u64::from_le_bytes(b)
        }
    }
}
