//! Decoding of the texture fetches `tex` and `tld4` on texture objects (PTX ISA §9.7.10.3,
//! §9.7.10.4), in the unified mode CUDA's texture objects use: the texture operand is a
//! 64-bit register holding the object's handle, and the sampler is part of the object.
//! Texture references (`.texref`), separate samplers, mipmap levels (`tex.level`,
//! `tex.grad`), depth compares, offsets and the residency predicate are errors naming what
//! is unsupported.

use ptx::ast::{self, OperandKind as K};

use super::decode::{bad, count_error, Mods};
use super::typecheck::Rule;
use super::{KernelLowerer, LowerError};
use crate::inst::{Inst, Op, TexGeom, Ty};

const GEOMS: &[(&str, TexGeom)] = &[
    ("1d", TexGeom::D1),
    ("2d", TexGeom::D2),
    ("3d", TexGeom::D3),
    ("a1d", TexGeom::A1d),
    ("a2d", TexGeom::A2d),
];

impl KernelLowerer<'_> {
    /// `tex.geom.v4.dty.cty d, [a, c]` or `tld4.comp.2d.v4.dty.f32 d, [a, c]`.
    pub(super) fn tex(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        let gather = if i.opcode.value == "tld4" {
            let comp = m
                .one_of(&[("r", 0u8), ("g", 1), ("b", 2), ("a", 3)])
                .ok_or_else(|| m.missing("a component `.r`, `.g`, `.b` or `.a`"))?;
            Some(comp)
        } else {
            None
        };
        let geom = m
            .one_of(GEOMS)
            .ok_or_else(|| m.missing("a geometry such as `.2d`"))?;
        if gather.is_some() && !matches!(geom, TexGeom::D2 | TexGeom::A2d) {
            return Err(m.missing("`.2d` or `.a2d` (`tld4` gathers from 2D textures)"));
        }
        if !m.has("v4") {
            return Err(m.missing("`.v4`"));
        }
        let dty = m.need_ty(&[Ty::F32, Ty::S32, Ty::U32])?;
        let cty = if gather.is_some() {
            m.need_ty(&[Ty::F32])?
        } else {
            m.need_ty(&[Ty::F32, Ty::S32])?
        };
        let [d, addr] = i.operands.as_slice() else {
            return Err(count_error(
                i,
                "2 (a texture with a separate sampler, a depth compare or an offset is not supported)",
            ));
        };
        let K::Vector(regs) = &d.kind else {
            return Err(bad(
                i,
                "a vector of four destinations (the residency predicate `|p` is not supported)",
                d.span,
            ));
        };
        if regs.len() != 4 {
            return Err(bad(i, "a vector of four destinations", d.span));
        }
        let K::AddressTuple(parts) = &addr.kind else {
            return Err(bad(i, "`[texture, {coordinates}]`", addr.span));
        };
        let [handle, coords] = parts.as_slice() else {
            return Err(bad(
                i,
                "`[texture, {coordinates}]` (separate samplers are not supported)",
                addr.span,
            ));
        };
        let coords: &[ast::Operand] = match &coords.kind {
            K::Vector(v) => v,
            _ => std::slice::from_ref(coords),
        };
        if coords.len() != geom.operands() {
            return Err(bad(
                i,
                match geom {
                    TexGeom::D1 => "one coordinate",
                    TexGeom::D2 => "two coordinates",
                    TexGeom::A1d => "a layer and one coordinate",
                    TexGeom::D3 => "four coordinates (the fourth ignored)",
                    TexGeom::A2d => "a layer and three coordinates (the third ignored)",
                },
                addr.span,
            ));
        }
        let mut inst = Inst::new(
            Op::Tex {
                geom,
                dty,
                cty,
                gather,
            },
            i.span,
        );
        for (k, r) in regs.iter().enumerate() {
            inst.dsts[k] = self.dst(i, r, dty, Rule::Exact)?;
        }
        inst.n_dsts = 4;
        // A texture object is a 64-bit handle in a register; a `.texref` name is the
        // retired texture-reference API.
        if !matches!(&handle.kind, K::Ident { name, .. } if matches!(self.lookup(name), Some(super::Sym::Reg(_))))
        {
            return Err(bad(
                i,
                "a register holding a texture object (texture references are not supported)",
                handle.span,
            ));
        }
        inst.srcs[0] = self.src(i, handle, Ty::U64)?;
        for (k, c) in coords.iter().enumerate() {
            // The layer of a layered geometry is an integer; a 3D or layered-2D vector's
            // padding element is read as written.
            let ty = if geom.layered() && k == 0 {
                Ty::S32
            } else {
                cty
            };
            inst.srcs[1 + k] = match &c.kind {
                K::Sink => crate::inst::Operand::Imm(0),
                _ => self.src(i, c, ty)?,
            };
        }
        inst.n_srcs = 1 + coords.len() as u8;
        Ok(inst)
    }
}
