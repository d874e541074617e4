//! The launch spec for running an arbitrary PTX file: buffers, launch shape, arguments and
//! optional checks, in TOML.
//!
//! ```toml
//! kernel = "saxpy"          # entry name; optional when the module has one kernel
//! grid = [8]                # 1 to 3 dimensions
//! block = [128]
//! dynamic_smem = 0          # bytes, optional
//!
//! [[buffer]]
//! name = "x"
//! type = "f32"              # u8 u16 u32 u64 s32 s64 f32 f64
//! len = 1024
//! init = "iota"             # zero (default) | iota | random | fill | values
//!
//! [[buffer]]
//! name = "y"
//! type = "f32"
//! len = 1024
//! init = "fill"
//! value = 1.0
//!
//! [[texture]]              # a texture object over a buffer, with its sampler
//! name = "img"
//! buffer = "x"
//! offset = 0                # bytes into the buffer, optional
//! format = "f32"            # channel type: f32 f16 u8 s8 u16 s16 u32 s32
//! channels = 1              # 1, 2 or 4
//! width = 32                # texels; height, depth (default 1) and layers (0) optional
//! height = 32
//! pitch = 0                 # bytes per row, 0 = packed
//! address = "clamp"         # clamp | border | wrap | mirror, or one per dimension
//! filter = "point"          # point | linear
//! read = "element"          # element | normalized-float
//! normalized = false        # coordinates in [0, 1) span the texture
//!
//! [[arg]]
//! buffer = "x"              # a buffer's device address
//! [[arg]]
//! texture = "img"           # a texture object's handle (cudaTextureObject_t)
//! [[arg]]
//! u32 = 1024                # or s32, u64, s64, f32, f64
//!
//! [[check]]
//! buffer = "y"
//! values = [1.0, 3.5]       # a prefix of the buffer, or `fill = 2.0` for every element
//! tolerance = 1e-6          # relative, for floats; integers compare exactly
//! ```

use gpu::texture::{AddressMode, Filter, ReadMode, TexelType, TextureDesc};
use serde::Deserialize;

pub use workload::data::{ElemType, Init};

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Buffer {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: ElemType,
    pub len: usize,
    #[serde(default)]
    pub init: Init,
    #[serde(default)]
    pub value: f64,
    #[serde(default)]
    pub values: Vec<f64>,
    #[serde(default)]
    pub seed: u64,
}

/// A texture object over (part of) a buffer, with its sampler.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Texture {
    pub name: String,
    pub buffer: String,
    #[serde(default)]
    pub offset: u64,
    #[serde(default = "default_format")]
    pub format: TexelType,
    #[serde(default = "one")]
    pub channels: u32,
    pub width: u32,
    #[serde(default = "one")]
    pub height: u32,
    #[serde(default = "one")]
    pub depth: u32,
    #[serde(default)]
    pub layers: u32,
    #[serde(default)]
    pub pitch: u64,
    #[serde(default)]
    pub address: Addressing,
    #[serde(default)]
    pub filter: Filter,
    #[serde(default)]
    pub read: ReadMode,
    #[serde(default)]
    pub normalized: bool,
}

fn default_format() -> TexelType {
    TexelType::F32
}

fn one() -> u32 {
    1
}

/// One addressing mode for every dimension, or one per dimension (x, y, z).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Addressing {
    All(AddressMode),
    PerDim(Vec<AddressMode>),
}

impl Default for Addressing {
    fn default() -> Self {
        Addressing::All(AddressMode::Clamp)
    }
}

impl Texture {
    /// The texture object over the buffer at `buffer_base`.
    pub fn desc(&self, buffer_base: u64) -> TextureDesc {
        let mut address = [AddressMode::Clamp; 3];
        match &self.address {
            Addressing::All(a) => address = [*a; 3],
            Addressing::PerDim(v) => {
                for (d, a) in v.iter().take(3).enumerate() {
                    address[d] = *a;
                }
            }
        }
        TextureDesc {
            base: buffer_base.saturating_add(self.offset),
            texel: self.format,
            channels: self.channels,
            extent: [self.width, self.height, self.depth],
            layers: self.layers,
            pitch: self.pitch,
            address,
            filter: self.filter,
            read: self.read,
            normalized: self.normalized,
        }
    }
}

/// One kernel argument: exactly one field set.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arg {
    pub buffer: Option<String>,
    pub texture: Option<String>,
    pub u32: Option<u32>,
    pub s32: Option<i32>,
    pub u64: Option<u64>,
    pub s64: Option<i64>,
    pub f32: Option<f32>,
    pub f64: Option<f64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub buffer: String,
    #[serde(default)]
    pub values: Vec<f64>,
    pub fill: Option<f64>,
    #[serde(default)]
    pub tolerance: f64,
}

/// A whole launch spec.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub kernel: Option<String>,
    pub grid: Vec<u32>,
    pub block: Vec<u32>,
    #[serde(default)]
    pub dynamic_smem: u32,
    #[serde(default, rename = "buffer")]
    pub buffers: Vec<Buffer>,
    #[serde(default, rename = "texture")]
    pub textures: Vec<Texture>,
    #[serde(default, rename = "arg")]
    pub args: Vec<Arg>,
    #[serde(default, rename = "check")]
    pub checks: Vec<Check>,
}

/// A spec problem, naming the field.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    #[error("`{field}`: {what}")]
    Invalid { field: String, what: String },
}

impl Spec {
    pub fn parse(text: &str) -> Result<Spec, SpecError> {
        let spec: Spec = toml::from_str(text)?;
        spec.validate()?;
        Ok(spec)
    }

    fn validate(&self) -> Result<(), SpecError> {
        let invalid = |field: &str, what: &str| SpecError::Invalid {
            field: field.to_string(),
            what: what.to_string(),
        };
        for (name, dims) in [("grid", &self.grid), ("block", &self.block)] {
            if dims.is_empty() || dims.len() > 3 {
                return Err(invalid(name, "needs 1 to 3 dimensions"));
            }
        }
        let mut declared = 0u64;
        for (i, b) in self.buffers.iter().enumerate() {
            if self.buffers[..i].iter().any(|o| o.name == b.name) {
                return Err(invalid(&format!("buffer.{}", b.name), "declared twice"));
            }
            // Checked before anything is allocated, with arithmetic that cannot overflow.
            let max = workload::scenario::MAX_BUFFER_BYTES;
            let bytes = (b.len as u64).saturating_mul(b.ty.size() as u64);
            if b.len == 0 || bytes > max {
                return Err(invalid(
                    &format!("buffer.{}.len", b.name),
                    &format!(
                        "{} elements of {} bytes: must be 1 to {max} bytes",
                        b.len,
                        b.ty.size()
                    ),
                ));
            }
            declared = declared.saturating_add(bytes);
            let total = workload::scenario::MAX_TOTAL_BUFFER_BYTES;
            if declared > total {
                return Err(invalid(
                    &format!("buffer.{}.len", b.name),
                    &format!("the buffers add up to more than {total} bytes"),
                ));
            }
            if b.init == Init::File {
                return Err(invalid(
                    &format!("buffer.{}.init", b.name),
                    "inputs from files are read by scenarios (`switchyard scenario`, see scenarios/README.md); a launch spec takes zero, iota, random, fill or values",
                ));
            }
        }
        for (i, t) in self.textures.iter().enumerate() {
            let field = |f: &str| format!("texture.{}.{f}", t.name);
            if self.textures[..i].iter().any(|o| o.name == t.name) {
                return Err(invalid(&format!("texture.{}", t.name), "declared twice"));
            }
            let Some(b) = self.buffers.iter().find(|b| b.name == t.buffer) else {
                return Err(invalid(
                    &field("buffer"),
                    &format!("no buffer named `{}`", t.buffer),
                ));
            };
            if let Addressing::PerDim(v) = &t.address {
                if v.is_empty() || v.len() > 3 {
                    return Err(invalid(&field("address"), "needs 1 to 3 modes"));
                }
            }
            let desc = t.desc(0);
            desc.validate()
                .map_err(|e| invalid(&field(e.field), &e.what))?;
            let have = (b.len as u64).saturating_mul(b.ty.size() as u64);
            let need = t.offset.saturating_add(desc.bytes());
            if need > have {
                return Err(invalid(
                    &format!("texture.{}", t.name),
                    &format!(
                        "needs {need} bytes of buffer `{}` (offset {} plus {} of texels), which has {have}",
                        t.buffer,
                        t.offset,
                        desc.bytes()
                    ),
                ));
            }
        }
        for (i, a) in self.args.iter().enumerate() {
            let set = [
                a.buffer.is_some(),
                a.texture.is_some(),
                a.u32.is_some(),
                a.s32.is_some(),
                a.u64.is_some(),
                a.s64.is_some(),
                a.f32.is_some(),
                a.f64.is_some(),
            ]
            .iter()
            .filter(|x| **x)
            .count();
            if set != 1 {
                return Err(invalid(
                    &format!("arg[{i}]"),
                    "needs exactly one of buffer, texture, u32, s32, u64, s64, f32, f64",
                ));
            }
            if let Some(t) = &a.texture {
                if !self.textures.iter().any(|x| &x.name == t) {
                    return Err(invalid(
                        &format!("arg[{i}].texture"),
                        &format!("no texture named `{t}`"),
                    ));
                }
            }
            if let Some(b) = &a.buffer {
                if !self.buffers.iter().any(|x| &x.name == b) {
                    return Err(invalid(
                        &format!("arg[{i}].buffer"),
                        &format!("no buffer named `{b}`"),
                    ));
                }
            }
        }
        for (i, c) in self.checks.iter().enumerate() {
            let Some(b) = self.buffers.iter().find(|x| x.name == c.buffer) else {
                return Err(invalid(
                    &format!("check[{i}].buffer"),
                    &format!("no buffer named `{}`", c.buffer),
                ));
            };
            if c.values.len() > b.len {
                return Err(invalid(
                    &format!("check[{i}].values"),
                    "longer than the buffer",
                ));
            }
            // An infinite tolerance passes every value and a NaN one fails every inexact one.
            if !(c.tolerance.is_finite() && c.tolerance >= 0.0) {
                return Err(invalid(
                    &format!("check[{i}].tolerance"),
                    &format!(
                        "{} is not a tolerance: it must be finite and non-negative",
                        c.tolerance
                    ),
                ));
            }
            if c.values.is_empty() == c.fill.is_none() {
                return Err(invalid(
                    &format!("check[{i}]"),
                    "needs exactly one of `values` or `fill`",
                ));
            }
        }
        Ok(())
    }

    /// Launch dimensions padded to three.
    pub fn dims(v: &[u32]) -> [u32; 3] {
        let mut d = [1; 3];
        d[..v.len()].copy_from_slice(v);
        d
    }
}

impl Buffer {
    /// The initial bytes (random values: uniform in [0, 1) for floats, [0, 2^16) for
    /// integers).
    pub fn initial_bytes(&self) -> Vec<u8> {
        let range = if self.ty.is_float() {
            (0.0, 1.0)
        } else {
            (0.0, 65536.0)
        };
        workload::data::generate(
            self.ty,
            self.len,
            self.init,
            self.value,
            &self.values,
            range,
            self.seed,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        grid = [2]
        block = [64]
        [[buffer]]
        name = "x"
        type = "f32"
        len = 4
        init = "iota"
        [[arg]]
        buffer = "x"
        [[arg]]
        u32 = 4
        [[check]]
        buffer = "x"
        values = [0, 1]
    "#;

    #[test]
    fn parses_a_spec_and_builds_buffers() {
        let s = Spec::parse(GOOD).unwrap();
        assert_eq!(Spec::dims(&s.grid), [2, 1, 1]);
        let bytes = s.buffers[0].initial_bytes();
        assert_eq!(bytes.len(), 16);
        assert_eq!(s.buffers[0].ty.decode(&bytes, 3), 3.0);
    }

    #[test]
    fn unknown_fields_and_bad_references_name_the_field() {
        let e = Spec::parse(&GOOD.replace("len = 4", "len = 4\nlength = 3")).unwrap_err();
        assert!(e.to_string().contains("length"), "{e}");
        let e = Spec::parse(&GOOD.replace(
            "buffer = \"x\"\n        [[arg]]",
            "buffer = \"nope\"\n        [[arg]]",
        ))
        .unwrap_err();
        assert!(e.to_string().contains("arg[0].buffer"), "{e}");
        let e = Spec::parse(&GOOD.replace("grid = [2]", "grid = []")).unwrap_err();
        assert!(e.to_string().contains("grid"), "{e}");
    }

    #[test]
    fn textures_are_checked_against_their_buffer_and_sampler_rules() {
        let tex = |extra: &str| {
            format!(
                "{GOOD}\n[[texture]]\nname = \"t\"\nbuffer = \"x\"\nwidth = 2\nheight = 2\n{extra}\n[[arg]]\ntexture = \"t\"\n"
            )
        };
        let s = Spec::parse(&tex(
            "address = [\"border\", \"clamp\"]\nfilter = \"linear\"",
        ))
        .unwrap();
        let d = s.textures[0].desc(0x1000);
        assert_eq!(
            d.address,
            [AddressMode::Border, AddressMode::Clamp, AddressMode::Clamp]
        );
        assert_eq!((d.base, d.bytes()), (0x1000, 16));
        for (extra, field) in [
            ("channels = 3", "texture.t.channels"),
            ("depth = 2", "texture.t`"),
            ("offset = 4", "texture.t`"),
            ("address = \"wrap\"", "texture.t.address"),
            ("format = \"u32\"\nfilter = \"linear\"", "texture.t.filter"),
            ("read = \"normalized-float\"", "texture.t.read"),
            ("address = []", "texture.t.address"),
        ] {
            let e = Spec::parse(&tex(extra)).unwrap_err().to_string();
            assert!(e.contains(field), "{extra}: {e}");
        }
        let e = Spec::parse(&tex("").replace("buffer = \"x\"\nwidth", "buffer = \"y\"\nwidth"))
            .unwrap_err();
        assert!(e.to_string().contains("texture.t.buffer"), "{e}");
        let e = Spec::parse(&tex("").replace("texture = \"t\"", "texture = \"u\"")).unwrap_err();
        assert!(e.to_string().contains("arg[2].texture"), "{e}");
    }

    #[test]
    fn buffers_are_bounded_alone_and_together_before_allocation() {
        let one = |name: &str, len: u64| {
            format!("[[buffer]]\nname = \"{name}\"\ntype = \"f64\"\nlen = {len}\n")
        };
        let head = "grid = [1]\nblock = [32]\n";
        // 2^27 f64 = 1 GiB: one is fine, five add up to more than 4 GiB.
        let max = 1u64 << 27;
        assert!(Spec::parse(&format!("{head}{}", one("a", max))).is_ok());
        let e = Spec::parse(&format!("{head}{}", one("a", max + 1))).unwrap_err();
        assert!(e.to_string().contains("buffer.a.len"), "{e}");
        let five: String = (0..5).map(|i| one(&format!("b{i}"), max)).collect();
        let e = Spec::parse(&format!("{head}{five}")).unwrap_err();
        assert!(
            e.to_string().contains("buffer.b4.len") && e.to_string().contains("add up"),
            "{e}"
        );
    }

    #[test]
    fn tolerances_must_be_finite_and_non_negative() {
        let with = |t: &str| {
            GOOD.replace(
                "values = [0, 1]",
                &format!("values = [0, 1]\ntolerance = {t}"),
            )
        };
        assert!(Spec::parse(&with("1e-6")).is_ok());
        assert!(Spec::parse(&with("0.0")).is_ok());
        for bad in ["inf", "nan", "-1e-6", "-inf"] {
            let e = Spec::parse(&with(bad)).unwrap_err().to_string();
            assert!(
                e.contains("check[0].tolerance") && e.contains("finite and non-negative"),
                "{bad}: {e}"
            );
        }
    }
}
