//! Texture objects: a texture (texels in device memory, their format and extent) with its
//! sampler (addressing, filtering, read mode, coordinate normalisation), as a CUDA
//! `cudaTextureObject_t` holds them, and the fetch `tex`/`tld4` perform (PTX ISA §9.7.10;
//! CUDA C++ Programming Guide, appendix "Texture Fetching").
//!
//! A kernel names a texture by a 64-bit handle ([`TextureDesc`]s are registered with
//! [`crate::memory::DeviceMemory::create_texture`]). A fetch turns coordinates into texel
//! taps ([`footprint`]): one for nearest-point sampling, 2, 4 or 8 for linear filtering, each
//! tap's index mapped by the addressing mode (a border tap reads zero), and weights with 8
//! fractional bits, as the guide specifies for the filtering hardware.

use std::fmt;

/// The type of one channel of a texel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TexelType {
    F32,
    F16,
    U8,
    S8,
    U16,
    S16,
    U32,
    S32,
}

impl TexelType {
    pub fn bytes(self) -> u32 {
        match self {
            TexelType::U8 | TexelType::S8 => 1,
            TexelType::F16 | TexelType::U16 | TexelType::S16 => 2,
            TexelType::F32 | TexelType::U32 | TexelType::S32 => 4,
        }
    }

    fn is_float(self) -> bool {
        matches!(self, TexelType::F32 | TexelType::F16)
    }
}

/// What a coordinate outside the texture reads (per dimension).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AddressMode {
    /// The nearest edge texel.
    #[default]
    Clamp,
    /// Zero.
    Border,
    /// The texture repeats (normalised coordinates only).
    Wrap,
    /// The texture repeats mirrored (normalised coordinates only).
    Mirror,
}

/// How a coordinate between texel centres is sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Filter {
    /// The texel the coordinate falls in.
    #[default]
    Point,
    /// Linear interpolation of the nearest 2 (1D), 4 (2D) or 8 (3D) texels.
    Linear,
}

/// How integer texels are returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadMode {
    /// As stored: integers as integers, floats as floats.
    #[default]
    Element,
    /// 8- and 16-bit integers as floats in [0, 1] (unsigned) or [-1, 1] (signed).
    NormalizedFloat,
}

/// A texture object: where its texels are and how it is sampled.
#[derive(Clone, Debug, PartialEq)]
pub struct TextureDesc {
    /// Device address of texel (0, 0, 0) of layer 0.
    pub base: u64,
    pub texel: TexelType,
    /// Channels per texel: 1, 2 or 4.
    pub channels: u32,
    /// Texels in x, y and z (1 for a dimension the texture does not have).
    pub extent: [u32; 3],
    /// Layers of a layered texture (`tex.a1d`, `tex.a2d`); 0 for one that is not layered.
    pub layers: u32,
    /// Bytes from one row to the next; 0 for rows packed one after another.
    pub pitch: u64,
    pub address: [AddressMode; 3],
    pub filter: Filter,
    pub read: ReadMode,
    /// Coordinates in [0, 1) span the texture (else in texels).
    pub normalized: bool,
}

/// The largest extent of one dimension (CUDA's largest, for 1D linear textures, is 2^27).
pub const MAX_EXTENT: u32 = 1 << 27;

/// A texture descriptor that cannot be made, naming the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextureError {
    pub field: &'static str,
    pub what: String,
}

impl fmt::Display for TextureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "texture `{}`: {}", self.field, self.what)
    }
}

impl TextureDesc {
    pub fn texel_bytes(&self) -> u64 {
        u64::from(self.texel.bytes()) * u64::from(self.channels)
    }

    pub fn row_pitch(&self) -> u64 {
        if self.pitch == 0 {
            u64::from(self.extent[0]) * self.texel_bytes()
        } else {
            self.pitch
        }
    }

    /// Bytes of one layer.
    pub fn layer_bytes(&self) -> u64 {
        self.row_pitch() * u64::from(self.extent[1]) * u64::from(self.extent[2])
    }

    /// Bytes from `base` to the end of the last texel.
    pub fn bytes(&self) -> u64 {
        self.layer_bytes() * u64::from(self.layers.max(1))
    }

    /// Whether a fetch returns floats (else integers).
    pub fn returns_float(&self) -> bool {
        self.texel.is_float() || self.read == ReadMode::NormalizedFloat
    }

    /// Checks the descriptor on its own (its memory is checked where it is registered).
    pub fn validate(&self) -> Result<(), TextureError> {
        let err = |field, what: String| Err(TextureError { field, what });
        if !matches!(self.channels, 1 | 2 | 4) {
            return err("channels", format!("{}: must be 1, 2 or 4", self.channels));
        }
        for (d, &n) in self.extent.iter().enumerate() {
            if n == 0 || n > MAX_EXTENT {
                let field = ["width", "height", "depth"][d];
                return err(field, format!("{n}: must be 1 to {MAX_EXTENT}"));
            }
        }
        if self.layers > 2048 {
            return err("layers", format!("{}: must be at most 2048", self.layers));
        }
        let packed = u64::from(self.extent[0]) * self.texel_bytes();
        if self.pitch != 0
            && (self.pitch < packed || !self.pitch.is_multiple_of(self.texel_bytes()))
        {
            return err(
                "pitch",
                format!(
                    "{} bytes: must be 0 (packed) or a multiple of the texel size ({}) of at least a row ({packed})",
                    self.pitch,
                    self.texel_bytes()
                ),
            );
        }
        if self.read == ReadMode::NormalizedFloat
            && !matches!(
                self.texel,
                TexelType::U8 | TexelType::S8 | TexelType::U16 | TexelType::S16
            )
        {
            return err(
                "read",
                format!(
                    "normalized-float reads 8- and 16-bit integer texels, not {:?}",
                    self.texel
                ),
            );
        }
        if self.filter == Filter::Linear && !self.returns_float() {
            return err(
                "filter",
                "linear filtering needs float results (float texels, or a normalized-float read)"
                    .into(),
            );
        }
        if !self.normalized
            && self
                .address
                .iter()
                .any(|a| matches!(a, AddressMode::Wrap | AddressMode::Mirror))
        {
            return err(
                "address",
                "wrap and mirror need normalized coordinates".into(),
            );
        }
        Ok(())
    }

    /// The texel index of `i` in dimension `d` after the addressing mode; `None` for a
    /// border texel.
    fn address(&self, d: usize, i: i64) -> Option<u32> {
        let n = i64::from(self.extent[d]);
        let j = match self.address[d] {
            AddressMode::Clamp => i.clamp(0, n - 1),
            AddressMode::Border if !(0..n).contains(&i) => return None,
            AddressMode::Border => i,
            AddressMode::Wrap => i.rem_euclid(n),
            AddressMode::Mirror => {
                let m = i.rem_euclid(2 * n);
                if m < n {
                    m
                } else {
                    2 * n - 1 - m
                }
            }
        };
        Some(j as u32)
    }

    /// The device address of texel `idx` (x, y, z) of `layer`.
    pub fn texel_addr(&self, idx: [u32; 3], layer: u32) -> u64 {
        self.base
            + u64::from(layer) * self.layer_bytes()
            + (u64::from(idx[2]) * u64::from(self.extent[1]) + u64::from(idx[1])) * self.row_pitch()
            + u64::from(idx[0]) * self.texel_bytes()
    }
}

/// The shape of a fetch: its dimensions and whether its first coordinate is a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub dims: usize,
    pub layered: bool,
}

/// Coordinates of one lane's fetch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Coords {
    /// Texel indices (`.s32` coordinates): no filtering.
    Int([i32; 3]),
    /// Texel or normalised coordinates (`.f32`).
    Float([f32; 3]),
}

/// The texels one fetch reads: up to 8 taps, each a texel address (`None` for a border
/// texel) and its weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Footprint {
    pub taps: [(Option<u64>, f32); 8],
    pub n: usize,
}

/// The weight fraction as the filtering hardware holds it: 8 fractional bits.
fn quantize(frac: f32) -> f32 {
    (frac * 256.0).round() / 256.0
}

/// The coordinate in texels of a float coordinate in dimension `d`.
fn scaled(t: &TextureDesc, d: usize, x: f32) -> f32 {
    if t.normalized {
        x * t.extent[d] as f32
    } else {
        x
    }
}

/// Clamps a layer coordinate to the layers there are.
fn layer_of(t: &TextureDesc, g: Geometry, layer: i32) -> u32 {
    if g.layered {
        layer.clamp(0, t.layers.max(1) as i32 - 1) as u32
    } else {
        0
    }
}

/// The taps of a `tex` fetch at `c` (and `layer`, for a layered geometry).
pub fn footprint(t: &TextureDesc, g: Geometry, c: Coords, layer: i32) -> Footprint {
    let layer = layer_of(t, g, layer);
    let mut fp = Footprint {
        taps: [(None, 0.0); 8],
        n: 0,
    };
    let linear = t.filter == Filter::Linear && matches!(c, Coords::Float(_));
    // Per dimension: the first tap's index and the weight of the second (linear) tap.
    let mut base = [0i64; 3];
    let mut frac = [0f32; 3];
    for d in 0..g.dims {
        match c {
            Coords::Int(v) => base[d] = i64::from(v[d]),
            Coords::Float(v) => {
                let x = scaled(t, d, v[d]);
                if linear {
                    let xb = x - 0.5;
                    let f = xb.floor();
                    base[d] = f as i64;
                    frac[d] = quantize(xb - f);
                } else {
                    base[d] = x.floor() as i64;
                }
            }
        }
    }
    let corners = if linear { 1usize << g.dims } else { 1 };
    for k in 0..corners {
        let mut idx = [0u32; 3];
        let mut weight = 1.0f32;
        let mut border = false;
        for d in 0..g.dims {
            let up = (k >> d) & 1 == 1;
            if linear {
                weight *= if up { frac[d] } else { 1.0 - frac[d] };
            }
            match t.address(d, base[d] + i64::from(up)) {
                Some(i) => idx[d] = i,
                None => border = true,
            }
        }
        fp.taps[k] = ((!border).then(|| t.texel_addr(idx, layer)), weight);
    }
    fp.n = corners;
    fp
}

/// The four taps of a `tld4` gather at `c`, in the ISA's order: counter-clockwise from the
/// lower left, i.e. (i, j+1), (i+1, j+1), (i+1, j), (i, j) of the bilinear footprint whose
/// upper-left texel is (i, j).
pub fn gather_footprint(t: &TextureDesc, g: Geometry, c: [f32; 2], layer: i32) -> Footprint {
    let layer = layer_of(t, g, layer);
    let mut base = [0i64; 2];
    for d in 0..2 {
        base[d] = (scaled(t, d, c[d]) - 0.5).floor() as i64;
    }
    let mut fp = Footprint {
        taps: [(None, 0.0); 8],
        n: 4,
    };
    for (k, (dx, dy)) in [(0, 1), (1, 1), (1, 0), (0, 0)].into_iter().enumerate() {
        let x = t.address(0, base[0] + dx);
        let y = t.address(1, base[1] + dy);
        fp.taps[k] = (x.zip(y).map(|(x, y)| t.texel_addr([x, y, 0], layer)), 1.0);
    }
    fp
}

/// The texture object `handle` names in a device's table (handle `k + 1` is `textures[k]`).
pub fn by_handle(textures: &[TextureDesc], handle: u64) -> Option<&TextureDesc> {
    textures.get(usize::try_from(handle.checked_sub(1)?).ok()?)
}

/// The taps of one lane's `tex` (`gather` `None`) or `tld4` with the IR's operands: `src(k)`
/// reads source `k` (1.. the coordinates, a layered geometry's layer first).
pub fn fetch_footprint(
    t: &TextureDesc,
    geom: kir::inst::TexGeom,
    cty: kir::Ty,
    gather: Option<u8>,
    src: impl Fn(usize) -> u64,
) -> Footprint {
    let g = Geometry {
        dims: geom.dims(),
        layered: geom.layered(),
    };
    let first = 1 + usize::from(g.layered);
    let layer = if g.layered { src(1) as u32 as i32 } else { 0 };
    let coord = |d: usize| if d < g.dims { src(first + d) } else { 0 };
    let float = |d: usize| f32::from_bits(coord(d) as u32);
    match gather {
        Some(_) => gather_footprint(t, g, [float(0), float(1)], layer),
        None if cty == kir::Ty::F32 => footprint(t, g, Coords::Float([0, 1, 2].map(float)), layer),
        None => footprint(
            t,
            g,
            Coords::Int([0, 1, 2].map(|d| coord(d) as u32 as i32)),
            layer,
        ),
    }
}

/// A texel's channel `c` from its bytes: a float, or an integer (as i64) for element reads
/// of integer texels; missing channels read 0.
pub fn channel(t: &TextureDesc, texel: &[u8], c: usize) -> Channel {
    if c >= t.channels as usize {
        return if t.returns_float() {
            Channel::Float(0.0)
        } else {
            Channel::Int(0)
        };
    }
    let n = t.texel.bytes() as usize;
    let b = &texel[c * n..(c + 1) * n];
    let raw = crate::bytes::read_le(b);
    let normalized = t.read == ReadMode::NormalizedFloat;
    match t.texel {
        TexelType::F32 => Channel::Float(f32::from_bits(raw as u32)),
        TexelType::F16 => Channel::Float(crate::alu::f16_value(raw as u16) as f32),
        TexelType::U8 if normalized => Channel::Float(raw as u8 as f32 / 255.0),
        TexelType::S8 if normalized => {
            Channel::Float((f32::from(raw as u8 as i8) / 127.0).max(-1.0))
        }
        TexelType::U16 if normalized => Channel::Float(f32::from(raw as u16) / 65535.0),
        TexelType::S16 if normalized => {
            Channel::Float((f32::from(raw as u16 as i16) / 32767.0).max(-1.0))
        }
        TexelType::U8 | TexelType::U16 | TexelType::U32 => Channel::Int(raw as i64),
        TexelType::S8 => Channel::Int(i64::from(raw as u8 as i8)),
        TexelType::S16 => Channel::Int(i64::from(raw as u16 as i16)),
        TexelType::S32 => Channel::Int(i64::from(raw as u32 as i32)),
    }
}

/// One channel of a fetched texel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Channel {
    Float(f32),
    Int(i64),
}

impl Channel {
    /// The 32-bit register bits of the channel.
    pub fn bits(self) -> u32 {
        match self {
            Channel::Float(f) => f.to_bits(),
            Channel::Int(i) => i as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tex2d(w: u32, h: u32) -> TextureDesc {
        TextureDesc {
            base: 0x1000,
            texel: TexelType::F32,
            channels: 1,
            extent: [w, h, 1],
            layers: 0,
            pitch: 0,
            address: [AddressMode::Clamp; 3],
            filter: Filter::Point,
            read: ReadMode::Element,
            normalized: false,
        }
    }

    const G2: Geometry = Geometry {
        dims: 2,
        layered: false,
    };

    #[test]
    fn point_sampling_takes_the_texel_the_coordinate_falls_in() {
        let t = tex2d(8, 4);
        let fp = footprint(&t, G2, Coords::Float([2.99, 1.0, 0.0]), 0);
        assert_eq!(fp.n, 1);
        // Row 1, column 2: 0x1000 + (1 * 8 + 2) * 4.
        assert_eq!(fp.taps[0], (Some(0x1000 + 40), 1.0));
        // Clamped outside.
        let fp = footprint(&t, G2, Coords::Float([-3.0, 9.0, 0.0]), 0);
        assert_eq!(fp.taps[0].0, Some(0x1000 + 3 * 32));
    }

    #[test]
    fn linear_filtering_weighs_the_four_nearest_texels() {
        let mut t = tex2d(8, 4);
        t.filter = Filter::Linear;
        // x = 2.75 → xB = 2.25: texels 2 and 3, weight of 3 is 0.25; y = 1.5 → row 1 only.
        let fp = footprint(&t, G2, Coords::Float([2.75, 1.5, 0.0]), 0);
        assert_eq!(fp.n, 4);
        let at = |x: u64, y: u64| Some(0x1000 + (y * 8 + x) * 4);
        assert_eq!(fp.taps[0], (at(2, 1), 0.75));
        assert_eq!(fp.taps[1], (at(3, 1), 0.25));
        assert_eq!(fp.taps[2], (at(2, 2), 0.0));
        assert_eq!(fp.taps[3], (at(3, 2), 0.0));
        // Weights have 8 fractional bits: 1/3 becomes 85/256.
        let fp = footprint(&t, G2, Coords::Float([2.5 + 1.0 / 3.0, 1.5, 0.0]), 0);
        assert_eq!(fp.taps[1].1, 85.0 / 256.0);
    }

    #[test]
    fn addressing_modes_map_indices_outside_the_texture() {
        let mut t = tex2d(4, 1);
        t.normalized = true;
        let idx = |t: &TextureDesc, i: i64| t.address(0, i);
        assert_eq!([-1, 4, 5].map(|i| idx(&t, i)), [Some(0), Some(3), Some(3)]);
        t.address[0] = AddressMode::Border;
        assert_eq!([-1, 0, 4].map(|i| idx(&t, i)), [None, Some(0), None]);
        t.address[0] = AddressMode::Wrap;
        assert_eq!([-1, 4, 9].map(|i| idx(&t, i)), [Some(3), Some(0), Some(1)]);
        t.address[0] = AddressMode::Mirror;
        // 0 1 2 3 | 3 2 1 0 | 0 1 ...
        assert_eq!(
            [-1, 4, 7, 8].map(|i| idx(&t, i)),
            [Some(0), Some(3), Some(0), Some(0)]
        );
    }

    #[test]
    fn gather_returns_the_footprint_counter_clockwise_from_lower_left() {
        let t = tex2d(8, 4);
        let fp = gather_footprint(&t, G2, [3.0, 2.0], 0);
        // Upper-left texel (2, 1).
        let at = |x: u64, y: u64| Some(0x1000 + (y * 8 + x) * 4);
        let addrs: Vec<_> = fp.taps[..4].iter().map(|t| t.0).collect();
        assert_eq!(addrs, [at(2, 2), at(3, 2), at(3, 1), at(2, 1)]);
    }

    #[test]
    fn normalized_reads_map_integers_to_unit_ranges() {
        let mut t = tex2d(1, 1);
        t.texel = TexelType::S8;
        t.channels = 2;
        t.read = ReadMode::NormalizedFloat;
        assert_eq!(channel(&t, &[0x80, 127], 0), Channel::Float(-1.0));
        assert_eq!(channel(&t, &[0x80, 127], 1), Channel::Float(1.0));
        assert_eq!(channel(&t, &[0x80, 127], 3), Channel::Float(0.0));
        t.texel = TexelType::U8;
        assert_eq!(channel(&t, &[51, 0], 0), Channel::Float(0.2));
        t.read = ReadMode::Element;
        assert_eq!(channel(&t, &[200, 0], 0), Channel::Int(200));
    }

    #[test]
    fn invalid_descriptors_name_their_field() {
        let mut t = tex2d(4, 4);
        t.channels = 3;
        assert_eq!(t.validate().unwrap_err().field, "channels");
        let mut t = tex2d(4, 4);
        t.texel = TexelType::U32;
        t.filter = Filter::Linear;
        assert_eq!(t.validate().unwrap_err().field, "filter");
        let mut t = tex2d(4, 4);
        t.address[1] = AddressMode::Wrap;
        assert_eq!(t.validate().unwrap_err().field, "address");
        let mut t = tex2d(4, 4);
        t.pitch = 8;
        assert_eq!(t.validate().unwrap_err().field, "pitch");
        let mut t = tex2d(4, 4);
        t.read = ReadMode::NormalizedFloat;
        assert_eq!(t.validate().unwrap_err().field, "read");
        assert!(tex2d(4, 4).validate().is_ok());
    }
}
