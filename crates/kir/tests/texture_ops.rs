//! Lowering of `tex` and `tld4` on texture objects: the forms NVRTC 12 and 13 emit lower to
//! `Op::Tex` over the registers the PTX names; texture references, separate samplers,
//! mipmaps and malformed operands are errors naming what is wrong.

use kir::inst::{Op, TexGeom, Ty};
use kir::lower::{lower_module, LowerError};
use kir::Module;

fn lower(body: &str) -> Result<Module, Vec<LowerError>> {
    let src = format!(
        ".version 8.0\n.target sm_80\n.address_size 64\n.global .u64 legacy;\n\
         .visible .entry k()\n{{\n.reg .b32 %r<8>;\n.reg .f32 %f<8>;\n.reg .b64 %rd<4>;\n\
         {body}\nret;\n}}"
    );
    lower_module(&ptx::parse(&src).expect("parses"), "t.ptx")
}

fn first_op(body: &str) -> (Op, usize, usize) {
    let m = lower(body).unwrap_or_else(|e| panic!("{body}: {e:?}"));
    let k = m.kernels.values().next().unwrap();
    let (_, i) = k.insts.iter().next().unwrap();
    (i.op, i.dsts().len(), i.srcs().len())
}

#[test]
fn nvrtc_texture_fetches_lower_to_tex() {
    let cases = [
        (
            "tex.2d.v4.f32.f32 {%f0, %f1, %f2, %f3}, [%rd1, {%f4, %f5}];",
            TexGeom::D2,
            Ty::F32,
            Ty::F32,
            None,
            3,
        ),
        (
            "tex.1d.v4.s32.s32 {%r0, %r1, %r2, %r3}, [%rd1, {%r4}];",
            TexGeom::D1,
            Ty::S32,
            Ty::S32,
            None,
            2,
        ),
        (
            "tex.a2d.v4.f32.f32 {%f0, %f1, %f2, %f3}, [%rd1, {%r7, %f4, %f5, %f5}];",
            TexGeom::A2d,
            Ty::F32,
            Ty::F32,
            None,
            5,
        ),
        (
            "tex.3d.v4.f32.f32 {%f0, %f1, %f2, %f3}, [%rd1, {%f4, %f5, %f6, %f6}];",
            TexGeom::D3,
            Ty::F32,
            Ty::F32,
            None,
            5,
        ),
        (
            "tld4.g.2d.v4.f32.f32 {%f0, %f1, %f2, %f3}, [%rd1, {%f4, %f5}];",
            TexGeom::D2,
            Ty::F32,
            Ty::F32,
            Some(1),
            3,
        ),
        (
            "tex.2d.v4.u32.f32 {%r0, _, _, _}, [%rd1, {%f4, %f5}];",
            TexGeom::D2,
            Ty::U32,
            Ty::F32,
            None,
            3,
        ),
    ];
    for (body, geom, dty, cty, gather, srcs) in cases {
        let (op, dsts, n) = first_op(body);
        assert_eq!(
            op,
            Op::Tex {
                geom,
                dty,
                cty,
                gather
            },
            "{body}"
        );
        assert_eq!((dsts, n), (4, srcs), "{body}");
    }
}

#[test]
fn unsupported_and_malformed_fetches_are_errors() {
    let cases = [
        (
            "tex.2d.f32.f32 {%f0, %f1, %f2, %f3}, [%rd1, {%f4, %f5}];",
            "`.v4`",
        ),
        (
            "tex.2d.v4.f32.f32 {%f0, %f1, %f2, %f3}, [%rd1, {%f4}];",
            "two coordinates",
        ),
        (
            "tex.2d.v4.f32.f32 {%f0, %f1, %f2, %f3}, [legacy, {%f4, %f5}];",
            "texture references are not supported",
        ),
        (
            "tex.2d.v4.f32.f32 {%f0, %f1, %f2, %f3}, [%rd1, %rd2, {%f4, %f5}];",
            "separate samplers",
        ),
        (
            "tex.2d.v4.f32.f32 {%f0, %f1, %f2}, [%rd1, {%f4, %f5}];",
            "four destinations",
        ),
        (
            "tex.level.2d.v4.f32.f32 {%f0, %f1, %f2, %f3}, [%rd1, {%f4, %f5}], %f6;",
            "level",
        ),
        (
            "tex.2d.v4.f64.f32 {%f0, %f1, %f2, %f3}, [%rd1, {%f4, %f5}];",
            "f64",
        ),
        (
            "tld4.2d.v4.f32.f32 {%f0, %f1, %f2, %f3}, [%rd1, {%f4, %f5}];",
            "component",
        ),
        (
            "tld4.r.3d.v4.f32.f32 {%f0, %f1, %f2, %f3}, [%rd1, {%f4, %f5, %f6, %f6}];",
            "`.2d`",
        ),
        (
            "tex.2d.v4.f32.f32 {%rd0, %f1, %f2, %f3}, [%rd1, {%f4, %f5}];",
            "%rd0",
        ),
        (
            "tex.2d.v4.f32.f32 {%f0, %f1, %f2, %f3}, [%r1, {%f4, %f5}];",
            "%r1",
        ),
    ];
    for (body, needle) in cases {
        let text = lower(body)
            .expect_err(body)
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        assert!(text.contains(needle), "{body}: {text}");
    }
}
