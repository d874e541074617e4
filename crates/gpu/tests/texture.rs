//! Texture fetches of NVRTC-compiled CUDA (`data/tex.cu`) on both engines, against a CPU
//! reference written here from the CUDA C++ Programming Guide's "Texture Fetching" formulas
//! (nearest-point sampling `T[floor(x)]`; linear filtering `(1-a)(1-b)T[i,j] + a(1-b)T[i+1,j]
//! + (1-a)bT[i,j+1] + abT[i+1,j+1]` with `xB = x - 0.5`, `i = floor(xB)`, `a = frac(xB)` held
//! with 8 fractional bits; clamp, border, wrap and mirror addressing) and the PTX ISA's
//! `tld4` order (counter-clockwise from the lower left).

use gpu::texture::{AddressMode, Filter, ReadMode, TexelType, TextureDesc};
use gpu::{DevPtr, ExecError, Gpu, GpuError, KernelArg};

const PTX80: &str = include_str!("data/tex.sm_80.ptx");
const PTX90: &str = include_str!("data/tex.sm_90.ptx");

/// A 2D float texture as the reference sees it.
struct Ref {
    w: i64,
    h: i64,
    texels: Vec<f32>,
    address: AddressMode,
    filter: Filter,
    normalized: bool,
}

impl Ref {
    fn texel(&self, x: i64, y: i64) -> f32 {
        let map = |i: i64, n: i64| -> Option<i64> {
            match self.address {
                AddressMode::Clamp => Some(i.clamp(0, n - 1)),
                AddressMode::Border => (0..n).contains(&i).then_some(i),
                AddressMode::Wrap => Some(i.rem_euclid(n)),
                AddressMode::Mirror => {
                    let m = i.rem_euclid(2 * n);
                    Some(if m < n { m } else { 2 * n - 1 - m })
                }
            }
        };
        match (map(x, self.w), map(y, self.h)) {
            (Some(x), Some(y)) => self.texels[(y * self.w + x) as usize],
            _ => 0.0,
        }
    }

    fn fetch(&self, u: f32, v: f32) -> f32 {
        let (x, y) = if self.normalized {
            (u * self.w as f32, v * self.h as f32)
        } else {
            (u, v)
        };
        match self.filter {
            Filter::Point => self.texel(x.floor() as i64, y.floor() as i64),
            Filter::Linear => {
                let (xb, yb) = (x - 0.5, y - 0.5);
                let (i, j) = (xb.floor(), yb.floor());
                let a = ((xb - i) * 256.0).round() / 256.0;
                let b = ((yb - j) * 256.0).round() / 256.0;
                let (i, j) = (i as i64, j as i64);
                (1.0 - a) * (1.0 - b) * self.texel(i, j)
                    + a * (1.0 - b) * self.texel(i + 1, j)
                    + (1.0 - a) * b * self.texel(i, j + 1)
                    + a * b * self.texel(i + 1, j + 1)
            }
        }
    }
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn bytes_of(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A fresh device: functional, or timed on `a100`.
fn device(timed: bool) -> Gpu {
    if timed {
        let t = gpu::timing::TimedGpu::new(gpu::config::GpuConfig::preset("a100").unwrap());
        Gpu::timed(t).unwrap()
    } else {
        Gpu::new()
    }
}

fn launch(gpu: &mut Gpu, ptx: &str, kernel: &str, args: &[KernelArg]) -> Result<(), GpuError> {
    let m = gpu.load_ptx("tex.ptx", ptx)?;
    if gpu.machine().is_some() {
        gpu.launch_timed(m, kernel, [1, 1, 1], [32, 1, 1], 0, args, &mut |_| {})?;
    } else {
        gpu.launch(m, kernel, [1, 1, 1], [32, 1, 1], 0, args)?;
    }
    Ok(())
}

fn desc(base: DevPtr, w: u32, h: u32) -> TextureDesc {
    TextureDesc {
        base: base.0,
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

#[test]
fn two_d_fetches_sample_filter_and_address_as_the_guide_specifies() {
    let (w, h) = (8i64, 4i64);
    let texels: Vec<f32> = (0..w * h)
        .map(|k| (k % w) as f32 * 10.0 + (k / w) as f32 + 0.5)
        .collect();
    // (filter, address, normalized, u0, v0): coordinates run from (u0, v0) in steps of
    // 0.37 and 0.61, so they cross texel centres, edges and (shifted) the borders.
    let cases = [
        (Filter::Point, AddressMode::Clamp, false, -0.6, -0.3),
        (Filter::Point, AddressMode::Border, false, 5.0, 1.0),
        (Filter::Linear, AddressMode::Clamp, false, -0.6, -0.3),
        (Filter::Linear, AddressMode::Border, false, 5.3, 1.1),
        (Filter::Linear, AddressMode::Wrap, true, 0.8, 0.7),
        (Filter::Point, AddressMode::Mirror, true, 0.9, -0.8),
        (Filter::Linear, AddressMode::Mirror, true, -0.45, 0.6),
    ];
    for ptx in [PTX80, PTX90] {
        for timed in [false, true] {
            for &(filter, address, normalized, u0, v0) in &cases {
                let r = Ref {
                    w,
                    h,
                    texels: texels.clone(),
                    address,
                    filter,
                    normalized,
                };
                let mut gpu = device(timed);
                let data = gpu.alloc(texels.len() as u64 * 4);
                gpu.copy_to_device(data, &bytes_of(&texels)).unwrap();
                let mut d = desc(data, w as u32, h as u32);
                d.filter = filter;
                d.address = [address; 3];
                d.normalized = normalized;
                let t = gpu.create_texture(d).unwrap();
                let out = gpu.alloc(32 * 4);
                let args = [
                    KernelArg::U64(t),
                    KernelArg::F32(u0),
                    KernelArg::F32(v0),
                    KernelArg::Ptr(out),
                ];
                launch(&mut gpu, ptx, "fetch2d", &args).unwrap();
                let got = f32s(&gpu.copy_from_device(out, 32 * 4).unwrap());
                for (i, g) in got.iter().enumerate() {
                    let u = ((i % 8) as f32).mul_add(0.37, u0);
                    let v = ((i / 8) as f32).mul_add(0.61, v0);
                    let want = r.fetch(u, v);
                    assert!(
                        (g - want).abs() <= 1e-5 * want.abs().max(1.0),
                        "{filter:?} {address:?} normalized {normalized} timed {timed}: thread {i} at ({u}, {v}) got {g}, want {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn four_channel_and_normalized_integer_texels() {
    // RGBA8 texels read as normalized floats: channel c of texel (x, y) is 16x + 4y + c.
    let (w, h) = (8u32, 4u32);
    let texels: Vec<u8> = (0..w * h * 4)
        .map(|k| {
            let (t, c) = (k / 4, k % 4);
            ((t % w) * 16 + (t / w) * 4 + c) as u8
        })
        .collect();
    for timed in [false, true] {
        let mut gpu = device(timed);
        let data = gpu.alloc(texels.len() as u64);
        gpu.copy_to_device(data, &texels).unwrap();
        let mut d = desc(data, w, h);
        d.texel = TexelType::U8;
        d.channels = 4;
        d.read = ReadMode::NormalizedFloat;
        let t = gpu.create_texture(d).unwrap();
        let out = gpu.alloc(32 * 16);
        let args = [
            KernelArg::U64(t),
            KernelArg::F32(0.2),
            KernelArg::F32(0.1),
            KernelArg::Ptr(out),
        ];
        launch(&mut gpu, PTX90, "fetch2d4", &args).unwrap();
        let got = f32s(&gpu.copy_from_device(out, 32 * 16).unwrap());
        for i in 0..32 {
            let x = ((i % 8) as f32).mul_add(0.37, 0.2).floor() as u32;
            let y = ((i / 8) as f32).mul_add(0.61, 0.1).floor() as u32;
            for c in 0..4 {
                let want = (x.min(w - 1) * 16 + y.min(h - 1) * 4 + c) as f32 / 255.0;
                assert_eq!(got[i * 4 + c as usize], want, "thread {i} channel {c}");
            }
        }
    }
}

#[test]
fn integer_fetches_by_index_and_border_outside() {
    let texels: Vec<i32> = (0..64).map(|k| k * 7 - 100).collect();
    let raw: Vec<u8> = texels.iter().flat_map(|v| v.to_le_bytes()).collect();
    for timed in [false, true] {
        let mut gpu = device(timed);
        let data = gpu.alloc(raw.len() as u64);
        gpu.copy_to_device(data, &raw).unwrap();
        let mut d = desc(data, 64, 1);
        d.texel = TexelType::S32;
        d.address = [AddressMode::Border; 3];
        let t = gpu.create_texture(d).unwrap();
        let out = gpu.alloc(32 * 4);
        launch(
            &mut gpu,
            PTX80,
            "fetch1d_int",
            &[KernelArg::U64(t), KernelArg::Ptr(out)],
        )
        .unwrap();
        let got = gpu.copy_from_device(out, 32 * 4).unwrap();
        for i in 0..32i32 {
            let at = i * 3 - 5;
            let want = if (0..64).contains(&at) {
                texels[at as usize]
            } else {
                0
            };
            let g = i32::from_le_bytes(got[i as usize * 4..][..4].try_into().unwrap());
            assert_eq!(g, want, "thread {i} index {at}");
        }
    }
}

#[test]
fn tld4_gathers_one_channel_of_the_footprint_counter_clockwise_from_lower_left() {
    // Two channels; the gathered green channel of texel (x, y) is 100 + 10x + y.
    let (w, h) = (8i64, 4i64);
    let mut texels = Vec::new();
    for y in 0..h {
        for x in 0..w {
            texels.push(-1.0f32);
            texels.push((100 + 10 * x + y) as f32);
        }
    }
    for timed in [false, true] {
        let mut gpu = device(timed);
        let data = gpu.alloc(texels.len() as u64 * 4);
        gpu.copy_to_device(data, &bytes_of(&texels)).unwrap();
        let mut d = desc(data, w as u32, h as u32);
        d.channels = 2;
        let t = gpu.create_texture(d).unwrap();
        let out = gpu.alloc(32 * 16);
        launch(
            &mut gpu,
            PTX90,
            "gather2d",
            &[KernelArg::U64(t), KernelArg::Ptr(out)],
        )
        .unwrap();
        let got = f32s(&gpu.copy_from_device(out, 32 * 16).unwrap());
        for k in 0..32 {
            let u = (k % 8) as f32 * 0.9;
            let v = (k / 8) as f32 * 0.7;
            let i = (u - 0.5).floor() as i64;
            let j = (v - 0.5).floor() as i64;
            let g = |x: i64, y: i64| (100 + 10 * x.clamp(0, w - 1) + y.clamp(0, h - 1)) as f32;
            let want = [g(i, j + 1), g(i + 1, j + 1), g(i + 1, j), g(i, j)];
            assert_eq!(got[k * 4..k * 4 + 4], want, "thread {k} at ({u}, {v})");
        }
    }
}

#[test]
fn layered_and_three_d_textures() {
    // Layered: 3 layers of 4x2, texel (x, y) of layer l = 100l + 10x + y. 3D: 4x2x2,
    // texel (x, y, z) = 1000 + 100z + 10x + y. Point sampling, clamped.
    let lay: Vec<f32> = (0..3 * 2 * 4)
        .map(|k| (100 * (k / 8) + 10 * (k % 4) + (k / 4) % 2) as f32)
        .collect();
    let vol: Vec<f32> = (0..2 * 2 * 4)
        .map(|k| (1000 + 100 * (k / 8) + 10 * (k % 4) + (k / 4) % 2) as f32)
        .collect();
    for timed in [false, true] {
        let mut gpu = device(timed);
        let dl = gpu.alloc(lay.len() as u64 * 4);
        gpu.copy_to_device(dl, &bytes_of(&lay)).unwrap();
        let dv = gpu.alloc(vol.len() as u64 * 4);
        gpu.copy_to_device(dv, &bytes_of(&vol)).unwrap();
        let mut d = desc(dl, 4, 2);
        d.layers = 3;
        let tl = gpu.create_texture(d).unwrap();
        let mut d = desc(dv, 4, 2);
        d.extent[2] = 2;
        let tv = gpu.create_texture(d).unwrap();
        let out = gpu.alloc(64 * 4);
        let args = [KernelArg::U64(tl), KernelArg::U64(tv), KernelArg::Ptr(out)];
        launch(&mut gpu, PTX90, "layered_and_3d", &args).unwrap();
        let got = f32s(&gpu.copy_from_device(out, 64 * 4).unwrap());
        for i in 0..32usize {
            let x = (((i % 8) as f32).mul_add(0.5, 0.25).floor() as usize).min(3);
            // Layers past the last clamp to it.
            let layer = (i / 8).min(2);
            assert_eq!(
                got[2 * i],
                (100 * layer + 10 * x + 1) as f32,
                "layer, thread {i}"
            );
            let z = (((i / 8) as f32 * 0.5).floor() as usize).min(1);
            assert_eq!(
                got[2 * i + 1],
                (1000 + 100 * z + 10 * x + 1) as f32,
                "3D, thread {i}"
            );
        }
    }
}

#[test]
fn bad_texture_objects_are_errors() {
    let mut gpu = Gpu::new();
    let data = gpu.alloc(64);
    // More texels than the allocation holds.
    let e = gpu
        .create_texture(desc(data, 8, 4))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("texture `base`") && e.contains("128 bytes"),
        "{e}"
    );
    let mut d = desc(data, 4, 4);
    d.address = [AddressMode::Wrap; 3];
    let e = gpu.create_texture(d).unwrap_err().to_string();
    assert!(e.contains("texture `address`"), "{e}");
    // A handle that names no texture, and an integer texture read as floats.
    let out = gpu.alloc(32 * 4);
    let args = [
        KernelArg::U64(7),
        KernelArg::F32(0.0),
        KernelArg::F32(0.0),
        KernelArg::Ptr(out),
    ];
    let e = launch(&mut gpu, PTX90, "fetch2d", &args).unwrap_err();
    assert!(
        matches!(&e, GpuError::Exec(ExecError::Texture { .. }))
            && e.to_string().contains("0x7 is not a texture object")
            && e.to_string().contains("thread (0, 0, 0)"),
        "{e}"
    );
    let mut d = desc(data, 4, 4);
    d.texel = TexelType::U32;
    let t = gpu.create_texture(d).unwrap();
    let args = [
        KernelArg::U64(t),
        KernelArg::F32(0.0),
        KernelArg::F32(0.0),
        KernelArg::Ptr(out),
    ];
    let e = launch(&mut gpu, PTX90, "fetch2d", &args)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("returns integers but the instruction reads .f32"),
        "{e}"
    );
}
