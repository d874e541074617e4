//! Buffer contents: element types, how a buffer is initialised, and `.npy` / raw binary
//! input files.
//!
//! A `.npy` file (NumPy's format, version 1 to 3) holds a header — magic, version, a Python
//! dict literal with `descr`, `fortran_order` and `shape` — and then the array's bytes. Only
//! what a buffer needs is accepted: a little-endian (or single-byte) element type equal to
//! the buffer's and C order; the shape's product is the element count.

use serde::{Deserialize, Serialize};

/// Element types of buffers.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ElemType {
    U8,
    U16,
    U32,
    U64,
    S32,
    S64,
    F32,
    F64,
}

impl ElemType {
    pub fn size(self) -> usize {
        match self {
            ElemType::U8 => 1,
            ElemType::U16 => 2,
            ElemType::U32 | ElemType::S32 | ElemType::F32 => 4,
            ElemType::U64 | ElemType::S64 | ElemType::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, ElemType::F32 | ElemType::F64)
    }

    /// NumPy's `descr` of this type.
    pub fn npy_descr(self) -> &'static str {
        match self {
            ElemType::U8 => "|u1",
            ElemType::U16 => "<u2",
            ElemType::U32 => "<u4",
            ElemType::U64 => "<u8",
            ElemType::S32 => "<i4",
            ElemType::S64 => "<i8",
            ElemType::F32 => "<f4",
            ElemType::F64 => "<f8",
        }
    }

    /// Encodes a number as this type's little-endian bytes.
    pub fn encode(self, v: f64, out: &mut Vec<u8>) {
        match self {
            ElemType::U8 => out.push(v as u8),
            ElemType::U16 => out.extend((v as u16).to_le_bytes()),
            ElemType::U32 => out.extend((v as u32).to_le_bytes()),
            ElemType::U64 => out.extend((v as u64).to_le_bytes()),
            ElemType::S32 => out.extend((v as i32).to_le_bytes()),
            ElemType::S64 => out.extend((v as i64).to_le_bytes()),
            ElemType::F32 => out.extend((v as f32).to_le_bytes()),
            ElemType::F64 => out.extend(v.to_le_bytes()),
        }
    }

    /// Decodes element `i` of a byte buffer.
    pub fn decode(self, bytes: &[u8], i: usize) -> f64 {
        let b = &bytes[i * self.size()..(i + 1) * self.size()];
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        let u = u64::from_le_bytes(w);
        match self {
            ElemType::U8 | ElemType::U16 | ElemType::U32 | ElemType::U64 => u as f64,
            ElemType::S32 => u as u32 as i32 as f64,
            ElemType::S64 => u as i64 as f64,
            ElemType::F32 => f32::from_bits(u as u32) as f64,
            ElemType::F64 => f64::from_bits(u),
        }
    }
}

/// How a buffer's initial contents are made.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Init {
    #[default]
    Zero,
    /// 0, 1, 2, ...
    Iota,
    /// Uniform in `[min, max)` (integers: truncated), from a seed.
    Random,
    /// Every element `value`.
    Fill,
    /// The listed `values`, then zeros.
    Values,
    /// A `.npy` file, or raw little-endian bytes from any other file.
    File,
}

/// The contents of a buffer of `len` elements of `ty` made by `init` (not `File`).
pub fn generate(
    ty: ElemType,
    len: usize,
    init: Init,
    value: f64,
    values: &[f64],
    range: (f64, f64),
    seed: u64,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(len * ty.size());
    let mut rng = suite::Rng::new(seed ^ 0x9e37_79b9_7f4a_7c15);
    for i in 0..len {
        let v = match init {
            Init::Zero | Init::File => 0.0,
            Init::Iota => i as f64,
            Init::Fill => value,
            Init::Values => values.get(i).copied().unwrap_or(0.0),
            Init::Random => {
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let x = range.0 + u * (range.1 - range.0);
                if ty.is_float() {
                    x
                } else {
                    x.floor()
                }
            }
        };
        ty.encode(v, &mut out);
    }
    out
}

/// Why an input file cannot fill a buffer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NpyError {
    #[error("not a .npy file (no \\x93NUMPY magic)")]
    NoMagic,
    #[error("unsupported .npy version {0}")]
    Version(u8),
    #[error("truncated .npy file")]
    Truncated,
    #[error("malformed .npy header: {0}")]
    Header(String),
    #[error("Fortran-ordered arrays are not supported")]
    FortranOrder,
    #[error("element type `{found}` differs from the buffer's `{want}`")]
    Type { found: String, want: String },
    #[error("{found} data bytes for {elems} elements of {size} bytes")]
    Size {
        found: usize,
        elems: u64,
        size: usize,
    },
}

/// A `.npy` array: its NumPy type, element count and raw bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Npy {
    pub descr: String,
    pub elems: u64,
    pub data: Vec<u8>,
}

/// Parses a `.npy` file.
pub fn parse_npy(bytes: &[u8]) -> Result<Npy, NpyError> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(NpyError::NoMagic);
    }
    let (header_len, start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(NpyError::Truncated);
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        v => return Err(NpyError::Version(v)),
    };
    let end = start
        .checked_add(header_len)
        .filter(|&e| e <= bytes.len())
        .ok_or(NpyError::Truncated)?;
    let header = std::str::from_utf8(&bytes[start..end])
        .map_err(|_| NpyError::Header("not UTF-8".into()))?;
    let field = |key: &str| -> Result<&str, NpyError> {
        let at = header
            .find(&format!("'{key}'"))
            .ok_or_else(|| NpyError::Header(format!("no '{key}'")))?;
        let rest = header[at + key.len() + 2..].trim_start();
        rest.strip_prefix(':')
            .map(str::trim_start)
            .ok_or_else(|| NpyError::Header(format!("no value for '{key}'")))
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split('\'').next())
        .ok_or_else(|| NpyError::Header("descr is not a string".into()))?
        .to_string();
    if field("fortran_order")?.starts_with("True") {
        return Err(NpyError::FortranOrder);
    }
    let shape = field("shape")?;
    let shape = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| NpyError::Header("shape is not a tuple".into()))?;
    let mut elems = 1u64;
    for d in shape.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let n: u64 = d
            .trim_end_matches('L')
            .parse()
            .map_err(|_| NpyError::Header(format!("bad dimension `{d}`")))?;
        elems = elems
            .checked_mul(n)
            .ok_or_else(|| NpyError::Header("shape overflows".into()))?;
    }
    Ok(Npy {
        descr,
        elems,
        data: bytes[end..].to_vec(),
    })
}

/// The contents of a buffer of `ty` from an input file: a `.npy` array of the same type, or
/// raw little-endian bytes (`npy == false`). Returns the bytes and the element count.
pub fn from_file(ty: ElemType, bytes: &[u8], npy: bool) -> Result<(Vec<u8>, u64), NpyError> {
    if !npy {
        let elems = (bytes.len() / ty.size()) as u64;
        if !bytes.len().is_multiple_of(ty.size()) {
            return Err(NpyError::Size {
                found: bytes.len(),
                elems,
                size: ty.size(),
            });
        }
        return Ok((bytes.to_vec(), elems));
    }
    let a = parse_npy(bytes)?;
    let same = a.descr == ty.npy_descr()
        || (ty == ElemType::U8 && matches!(a.descr.as_str(), "<u1" | ">u1" | "u1"));
    if !same {
        return Err(NpyError::Type {
            found: a.descr,
            want: ty.npy_descr().into(),
        });
    }
    let want = a.elems.saturating_mul(ty.size() as u64);
    if a.data.len() as u64 != want {
        return Err(NpyError::Size {
            found: a.data.len(),
            elems: a.elems,
            size: ty.size(),
        });
    }
    Ok((a.data, a.elems))
}

/// Writes a `.npy` file (format version 1.0) holding `data`, elements of `ty` in C order,
/// as an array of `shape` (whose product the caller has checked against `data`): the magic
/// `\x93NUMPY`, version 1.0, the header's length (u16, little-endian), a header dict as
/// NumPy writes it (`{'descr': '<f4', 'fortran_order': False, 'shape': (n,), }`) padded
/// with spaces and ended by `\n` so that the data starts at a multiple of 64 bytes, then the
/// data (little-endian, as buffers hold it).
pub fn write_npy(ty: ElemType, shape: &[u64], data: &[u8]) -> Vec<u8> {
    debug_assert_eq!(
        shape.iter().product::<u64>() * ty.size() as u64,
        data.len() as u64,
        "the shape covers the data"
    );
    // Python's tuple syntax: `(5,)` for one dimension, `(2, 3)` for more.
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let shape = match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        ty.npy_descr()
    );
    // Magic (6) + version (2) + length (2) + header + '\n', padded to 64 bytes.
    let total = (10 + header.len() + 1).next_multiple_of(64);
    while 10 + header.len() + 1 < total {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    let len = u16::try_from(header.len()).expect("a header of at most 32 dimensions fits");
    out.extend(len.to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trips_and_checks_its_type() {
        let mut data = Vec::new();
        for v in [1.5f64, -2.0, 3.25] {
            ElemType::F32.encode(v, &mut data);
        }
        let file = write_npy(ElemType::F32, &[3], &data);
        assert_eq!(
            (10 + u16::from_le_bytes([file[8], file[9]]) as usize) % 64,
            0
        );
        let (bytes, n) = from_file(ElemType::F32, &file, true).unwrap();
        assert_eq!((bytes.as_slice(), n), (data.as_slice(), 3));
        assert_eq!(ElemType::F32.decode(&bytes, 2), 3.25);
        assert!(matches!(
            from_file(ElemType::S32, &file, true),
            Err(NpyError::Type { .. })
        ));
        assert_eq!(
            from_file(ElemType::F32, &file[..20], true),
            Err(NpyError::Truncated)
        );
        assert_eq!(
            from_file(ElemType::F32, b"hello world!", true),
            Err(NpyError::NoMagic)
        );
    }

    /// A version-1 `.npy` file with header dict `dict`, padded as NumPy pads it.
    fn npy_with(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        let mut h = dict.to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        f.extend((h.len() as u16).to_le_bytes());
        f.extend(h.as_bytes());
        f.extend(data);
        f
    }

    #[test]
    fn parses_a_header_as_numpy_writes_it() {
        // numpy.save of np.arange(6, dtype=np.int32).reshape(2, 3)
        let data: Vec<u8> = (0..6i32).flat_map(i32::to_le_bytes).collect();
        let f = npy_with(
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }",
            &data,
        );
        let a = parse_npy(&f).unwrap();
        assert_eq!((a.descr.as_str(), a.elems, a.data.len()), ("<i4", 6, 24));
        let fortran = npy_with(
            "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
            &data,
        );
        assert_eq!(parse_npy(&fortran).unwrap_err(), NpyError::FortranOrder);
    }

    #[test]
    fn the_encoder_writes_numpys_layout() {
        // Three f32s: the header exactly as numpy.save writes it (58 characters, so with
        // the magic, version, length and newline one 64-byte block is too few), the data
        // at byte 128.
        let data: Vec<u8> = [1.0f32, -2.5, 1e-3]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let f = write_npy(ElemType::F32, &[3], &data);
        assert_eq!(&f[..8], b"\x93NUMPY\x01\x00");
        let header_len = u16::from_le_bytes([f[8], f[9]]) as usize;
        assert_eq!(10 + header_len, 128, "the data starts at a multiple of 64");
        let header = std::str::from_utf8(&f[10..128]).unwrap();
        assert_eq!(
            header.trim_end_matches([' ', '\n']),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"
        );
        assert!(header.ends_with('\n') && !header[..header.len() - 1].contains('\n'));
        // Little-endian data: 1.0f32 is 0x3f800000.
        assert_eq!(&f[128..132], &[0x00, 0x00, 0x80, 0x3f]);
        assert_eq!(&f[128..], data.as_slice());
        assert_eq!(f.len(), 128 + 12);

        // Two dimensions, an integer type: `(2, 3)`, `<i4`, -1 as ff ff ff ff.
        let ints: Vec<u8> = (-1..5i32).flat_map(i32::to_le_bytes).collect();
        let f = write_npy(ElemType::S32, &[2, 3], &ints);
        let header_len = u16::from_le_bytes([f[8], f[9]]) as usize;
        assert_eq!((10 + header_len) % 64, 0);
        let header = std::str::from_utf8(&f[10..10 + header_len]).unwrap();
        assert!(header.starts_with("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert_eq!(&f[10 + header_len..10 + header_len + 4], &[0xff; 4]);
        let a = parse_npy(&f).unwrap();
        assert_eq!((a.descr.as_str(), a.elems), ("<i4", 6));
        assert_eq!(a.data, ints);

        // A header long enough to need a third 64-byte block still aligns the data.
        let mut shape = vec![1; 30];
        shape.push(2);
        let f = write_npy(ElemType::U8, &shape, &[7, 9]);
        let header_len = u16::from_le_bytes([f[8], f[9]]) as usize;
        assert_eq!(10 + header_len, 192);
        assert_eq!(&f[192..], &[7, 9]);
        assert!(std::str::from_utf8(&f[10..192])
            .unwrap()
            .contains("'descr': '|u1'"));
    }

    #[test]
    fn random_values_stay_in_their_range() {
        let b = generate(ElemType::S32, 1000, Init::Random, 0.0, &[], (-5.0, 5.0), 3);
        let vals: Vec<f64> = (0..1000).map(|i| ElemType::S32.decode(&b, i)).collect();
        assert!(vals.iter().all(|&v| (-5.0..5.0).contains(&v)));
        assert!(vals.contains(&-5.0) && vals.contains(&4.0));
        let f = generate(ElemType::F64, 1000, Init::Random, 0.0, &[], (2.0, 3.0), 3);
        assert!((0..1000).all(|i| (2.0..3.0).contains(&ElemType::F64.decode(&f, i))));
    }
}
