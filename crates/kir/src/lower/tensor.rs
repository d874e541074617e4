//! Decoding of the warp-level matrix instructions (`mma`, `wmma`, `ldmatrix`, `stmatrix`),
//! the asynchronous copies (`cp.async` and its groups) and the two-source packing `cvt`
//! (PTX ISA §9.7.14, §9.7.9.25, §9.7.9.21).
//!
//! A `wmma` instruction names up to 24 registers; it lowers to several IR instructions of at
//! most [`MAX_SRCS`] sources each, over the same registers, so register allocation,
//! liveness and context saves see every register the PTX names: `wmma.load`/`wmma.store`
//! to one instruction per 4 registers, `wmma.mma` to one `mma` per tile of its plan
//! ([`crate::matrix::wmma_plan`], [`crate::matrix::wmma_layout`]).

use ptx::ast::{self, OperandKind as K};

use super::decode::{bad, count_error, full_name, operand_index, Mods};
use super::typecheck::Rule;
use super::{KernelLowerer, LowerError};
use crate::ids::Reg;
use crate::inst::{Fp8, Inst, MbarrierOp, Op, Operand, Rounding, Space, Ty, MAX_SRCS};
use crate::matrix::{self, Frag, MmaElem, MmaShape, WMMA_PART_REGS};

/// Whether `opcode` with these modifiers is decoded here.
pub(super) fn handles(i: &ast::Instruction) -> bool {
    let first = i.modifiers.first().map(|m| m.value.as_str());
    match i.opcode.value.as_str() {
        "mma" | "wmma" | "ldmatrix" | "stmatrix" | "mbarrier" => true,
        "cp" => first == Some("async"),
        "cvt" => i.modifiers.iter().any(|m| {
            matches!(
                m.value.as_str(),
                "f16x2" | "bf16x2" | "tf32" | "e4m3x2" | "e5m2x2"
            )
        }),
        _ => false,
    }
}

const SHARED: &[(&str, Space)] = &[("shared", Space::Shared), ("shared::cta", Space::Shared)];

impl KernelLowerer<'_> {
    /// Decodes one of the instructions [`handles`] accepts into IR instructions.
    pub(super) fn tensor(
        &self,
        i: &ast::Instruction,
        m: &mut Mods,
    ) -> Result<Vec<Inst>, LowerError> {
        match i.opcode.value.as_str() {
            "mma" => self.mma(i, m).map(|x| vec![x]),
            "wmma" => self.wmma(i, m),
            "ldmatrix" | "stmatrix" => self.ldmatrix(i, m).map(|x| vec![x]),
            "cp" if i.modifiers.iter().any(|x| x.value == "mbarrier") => {
                self.cp_async_mbarrier(i, m).map(|x| vec![x])
            }
            "cp" => self.cp_async(i, m).map(|x| vec![x]),
            "mbarrier" => self.mbarrier(i, m).map(|x| vec![x]),
            _ => self.cvt_pack(i, m).map(|x| vec![x]),
        }
    }

    /// The registers of a `{...}` operand, each checked against `ty`.
    fn reg_list(
        &self,
        i: &ast::Instruction,
        o: &ast::Operand,
        want: usize,
        ty: Ty,
        what: &'static str,
    ) -> Result<Vec<Reg>, LowerError> {
        let K::Vector(parts) = &o.kind else {
            return Err(bad(i, what, o.span));
        };
        if parts.len() != want {
            return Err(LowerError::OperandType {
                inst: full_name(i),
                index: operand_index(i, o.span),
                operand: "{...}".into(),
                found: format!("a list of {} registers", parts.len()),
                expected: format!("{want} registers ({what})"),
                span: o.span,
            });
        }
        parts
            .iter()
            .map(|p| match self.src_as(i, p, ty, Rule::Exact)? {
                Operand::Reg(r) => Ok(r),
                _ => Err(bad(i, what, p.span)),
            })
            .collect()
    }

    fn mma(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        if !(m.has("sync") && m.has("aligned")) {
            return Err(m.missing("`.sync.aligned`"));
        }
        let shape = shape(i, m)?;
        // Only row-major A and column-major B exist for these shapes (m8n8k4 f16 aside).
        if !(m.has("row") && m.has("col")) {
            return Err(m.missing("`.row.col` layouts"));
        }
        let [d, a, b, c] = elems::<4>(i, m)?;
        let int = |e| matches!(e, MmaElem::S8 | MmaElem::U8);
        // `.satfinite` is for integer accumulation; `.rn` is f64's only (and default) rounding.
        let satfinite = int(a) && m.has("satfinite");
        if a == MmaElem::F64 {
            m.accept(&["rn"]);
        }
        let supported = matrix::mma_supported(shape, a, d)
            && matrix::mma_supported(shape, a, c)
            && (a == b || (int(a) && int(b)));
        if !supported {
            return Err(LowerError::UnsupportedInstruction {
                name: format!(
                    "{} (mma.{} with .{}.{}.{}.{}: supported are the Ampere/Hopper shapes and types)",
                    full_name(i),
                    shape.name(),
                    d.name(),
                    a.name(),
                    b.name(),
                    c.name()
                ),
                span: i.span,
            });
        }
        let [od, oa, ob, oc] = i.operands.as_slice() else {
            return Err(count_error(i, "4"));
        };
        let nd = matrix::frag_regs(shape, Frag::C, d) as usize;
        let nc = matrix::frag_regs(shape, Frag::C, c) as usize;
        let na = matrix::frag_regs(shape, Frag::A, a) as usize;
        let nb = matrix::frag_regs(shape, Frag::B, b) as usize;
        let dr = self.reg_list(i, od, nd, d.reg_ty(), "a `{...}` list of D registers")?;
        let ar = self.reg_list(i, oa, na, a.reg_ty(), "a `{...}` list of A registers")?;
        let br = self.reg_list(i, ob, nb, b.reg_ty(), "a `{...}` list of B registers")?;
        let cr = self.reg_list(i, oc, nc, c.reg_ty(), "a `{...}` list of C registers")?;
        let op = Op::Mma {
            shape,
            a,
            b,
            c,
            d,
            satfinite,
        };
        Ok(build(op, i, &dr, ar.iter().chain(&br).chain(&cr).copied()))
    }

    fn wmma(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Vec<Inst>, LowerError> {
        let kind = m
            .one_of(&[("load", 0u8), ("store", 1), ("mma", 2)])
            .ok_or_else(|| m.missing("`.load`, `.store` or `.mma`"))?;
        let frag = match kind {
            0 => Some(
                m.one_of(&[("a", Frag::A), ("b", Frag::B), ("c", Frag::C)])
                    .ok_or_else(|| m.missing("`.a`, `.b` or `.c`"))?,
            ),
            1 if m.has("d") => Some(Frag::C),
            1 => return Err(m.missing("`.d`")),
            _ => None,
        };
        if !(m.has("sync") && m.has("aligned")) {
            return Err(m.missing("`.sync.aligned`"));
        }
        let layouts: Vec<bool> =
            std::iter::from_fn(|| m.one_of(&[("row", true), ("col", false)])).collect();
        let shape = shape(i, m)?;
        let unsupported = |what: &str| {
            LowerError::UnsupportedInstruction {
            name: format!(
                "{} ({what}; wmma supports m16n16k16, m32n8k16 and m8n32k16 with f16, bf16, s8 or u8, m16n16k8 with tf32 and m8n8k4 with f64, into the accumulators mma takes)",
                full_name(i)
            ),
            span: i.span,
        }
        };
        if let Some(frag) = frag {
            let [row_major] = layouts.as_slice() else {
                return Err(m.missing("one layout, `.row` or `.col`"));
            };
            let space = m
                .one_of(&[
                    ("global", Space::Global),
                    ("shared", Space::Shared),
                    ("shared::cta", Space::Shared),
                ])
                .unwrap_or(Space::Generic);
            let [elem] = elems::<1>(i, m)?;
            let operand = match frag {
                Frag::A | Frag::B => {
                    Some(elem).filter(|e| !matches!(e, MmaElem::F32 | MmaElem::S32))
                }
                Frag::C => matrix::wmma_operand_of(shape, elem),
            };
            let Some(plan) = operand.and_then(|ab| matrix::wmma_plan(shape, ab)) else {
                return Err(unsupported(&format!(
                    "no .{} {:?} fragment of this shape",
                    elem.name(),
                    frag
                )));
            };
            let (regs_op, addr_op, stride_op) = match (kind, i.operands.as_slice()) {
                (0, [r, a]) => (r, a, None),
                (0, [r, a, s]) => (r, a, Some(s)),
                (1, [a, r]) => (r, a, None),
                (1, [a, r, s]) => (r, a, Some(s)),
                _ => return Err(count_error(i, "2 or 3")),
            };
            let n = matrix::wmma_regs(plan, frag, elem) as usize;
            let regs =
                self.reg_list(i, regs_op, n, elem.reg_ty(), "a `{...}` list of registers")?;
            let (space, base, offset) =
                self.address(i, addr_op, Some(space).filter(|s| *s != Space::Generic))?;
            // The leading dimension in elements; without it, the matrix is dense: its row
            // length (row-major) or column length (column-major).
            let stride = match stride_op {
                Some(s) => self.src(i, s, Ty::U32)?,
                None => {
                    let (rows, cols) = match frag {
                        Frag::A => (shape.m, shape.k),
                        Frag::B => (shape.k, shape.n),
                        Frag::C => (shape.m, shape.n),
                    };
                    Operand::Imm(u64::from(if *row_major { cols } else { rows }))
                }
            };
            let part_regs = WMMA_PART_REGS as usize;
            return Ok(regs
                .chunks(part_regs)
                .enumerate()
                .map(|(part, chunk)| {
                    let part = part as u8;
                    if kind == 0 {
                        let op = Op::WmmaLoad {
                            shape,
                            frag,
                            elem,
                            row_major: *row_major,
                            space,
                            offset,
                            part,
                        };
                        let mut inst = build(op, i, chunk, [].into_iter());
                        inst.srcs[..2].copy_from_slice(&[base, stride]);
                        inst.n_srcs = 2;
                        inst
                    } else {
                        let op = Op::WmmaStore {
                            shape,
                            elem,
                            row_major: *row_major,
                            space,
                            offset,
                            part,
                        };
                        let mut inst = build(op, i, &[], chunk.iter().copied());
                        inst.srcs.copy_within(0..chunk.len(), 2);
                        inst.srcs[..2].copy_from_slice(&[base, stride]);
                        inst.n_srcs += 2;
                        inst
                    }
                })
                .collect());
        }
        // wmma.mma.sync.aligned.alayout.blayout.shape{.rnd}.dtype{.atype.btype}.ctype{.satfinite}
        if layouts.len() != 2 {
            return Err(m.missing("the layouts of A and B, such as `.row.col`"));
        }
        // f64 takes a rounding modifier; the tensor core's f64 product rounds to nearest.
        m.has("rn");
        let satfinite = m.has("satfinite");
        let (d, ab, c) = match elems_any(m).as_slice() {
            [d, c] => (*d, MmaElem::F16, *c),
            [d, a, b, c] if a == b => (*d, *a, *c),
            _ => return Err(m.missing("the types `.dtype.ctype` or `.dtype.atype.btype.ctype`")),
        };
        let Some(plan) = matrix::wmma_plan(shape, ab) else {
            return Err(unsupported(&format!(
                "no .{} multiplicands of this shape",
                ab.name()
            )));
        };
        let s = plan.mma;
        if !(matrix::mma_supported(s, ab, d) && matrix::mma_supported(s, ab, c)) {
            return Err(unsupported(&format!(
                "wmma.mma of .{} into .{}",
                ab.name(),
                d.name()
            )));
        }
        if satfinite && !matches!(ab, MmaElem::S8 | MmaElem::U8) {
            return Err(unsupported("`.satfinite` is for integer multiplicands"));
        }
        let [od, oa, ob, oc] = i.operands.as_slice() else {
            return Err(count_error(i, "4"));
        };
        let dr = self.reg_list(
            i,
            od,
            matrix::wmma_regs(plan, Frag::C, d) as usize,
            d.reg_ty(),
            "a `{...}` list of D registers",
        )?;
        let ar = self.reg_list(
            i,
            oa,
            matrix::wmma_regs(plan, Frag::A, ab) as usize,
            ab.reg_ty(),
            "a `{...}` list of A registers",
        )?;
        let br = self.reg_list(
            i,
            ob,
            matrix::wmma_regs(plan, Frag::B, ab) as usize,
            ab.reg_ty(),
            "a `{...}` list of B registers",
        )?;
        let cr = self.reg_list(
            i,
            oc,
            matrix::wmma_regs(plan, Frag::C, c) as usize,
            c.reg_ty(),
            "a `{...}` list of C registers",
        )?;
        let op = Op::Mma {
            shape: s,
            a: ab,
            b: ab,
            c,
            d,
            satfinite,
        };
        // One mma per tile of the plan: A's row group, B's column group, the tile's
        // accumulator registers (the layout of `matrix::wmma_layout`). A half plan's padding
        // rows read zero and their results are dropped.
        let (ta, tb, tc, td) = (
            matrix::wmma_tile_regs(plan, Frag::A, ab),
            matrix::wmma_tile_regs(plan, Frag::B, ab),
            matrix::wmma_tile_regs(plan, Frag::C, c),
            matrix::wmma_tile_regs(plan, Frag::C, d),
        );
        let held = |t: &[Option<u32>]| t.iter().flatten().count();
        let (na, nb, nc, nd) = (held(&ta), held(&tb), held(&tc), held(&td));
        let mut tiles = Vec::new();
        for gi in 0..plan.rows as usize {
            for gj in 0..plan.cols as usize {
                let t = gi * plan.cols as usize + gj;
                let mut inst = Inst::new(op, i.span);
                let mut n = 0;
                for (regs, map, base) in
                    [(&ar, &ta, gi * na), (&br, &tb, gj * nb), (&cr, &tc, t * nc)]
                {
                    for k in map.iter() {
                        inst.srcs[n] = match k {
                            Some(k) => Operand::Reg(regs[base + *k as usize]),
                            None => Operand::Imm(0),
                        };
                        n += 1;
                    }
                }
                inst.n_srcs = n as u8;
                for (slot, k) in td.iter().enumerate() {
                    inst.dsts[slot] = k.map(|k| dr[t * nd + k as usize]);
                }
                inst.n_dsts = td.len() as u8;
                tiles.push(inst);
            }
        }
        // Each tile reads its sources after the tiles before it have written: a destination
        // of one that a later one reads would change its input.
        for (k, first) in tiles.iter().enumerate() {
            if tiles[k + 1..]
                .iter()
                .any(|later| first.defs().any(|r| later.uses().any(|u| u == r)))
            {
                return Err(bad(
                    i,
                    "destination registers distinct from the sources of the other tiles",
                    i.span,
                ));
            }
        }
        Ok(tiles)
    }

    fn ldmatrix(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        let store = i.opcode.value == "stmatrix";
        if !(m.has("sync") && m.has("aligned")) {
            return Err(m.missing("`.sync.aligned`"));
        }
        if !m.has("m8n8") {
            return Err(LowerError::UnsupportedInstruction {
                name: format!(
                    "{} (the m8n8 shape with .b16 elements is supported)",
                    full_name(i)
                ),
                span: i.span,
            });
        }
        let count = m
            .one_of(&[("x1", 1u8), ("x2", 2), ("x4", 4)])
            .ok_or_else(|| m.missing("`.x1`, `.x2` or `.x4`"))?;
        let trans = m.has("trans");
        let space = m.one_of(SHARED);
        m.need_ty(&[Ty::B16])?;
        let (addr_op, regs_op) = match (store, i.operands.as_slice()) {
            (false, [r, a]) => (a, r),
            (true, [a, r]) => (a, r),
            _ => return Err(count_error(i, "2")),
        };
        let regs = self
            .reg_list(
                i,
                regs_op,
                count as usize,
                Ty::B32,
                "a `{...}` list of registers",
            )
            .or_else(|e| match (&regs_op.kind, count) {
                // One matrix may name its register without braces.
                (K::Ident { .. }, 1) => match self.src(i, regs_op, Ty::B32)? {
                    Operand::Reg(r) => Ok(vec![r]),
                    _ => Err(e),
                },
                _ => Err(e),
            })?;
        let (space, base, offset) = self.address(i, addr_op, space)?;
        let mut inst = if store {
            let op = Op::Stmatrix {
                count,
                trans,
                space,
                offset,
            };
            let mut inst = build(op, i, &[], regs.iter().copied());
            inst.srcs.copy_within(0..regs.len(), 1);
            inst.n_srcs += 1;
            inst
        } else {
            let op = Op::Ldmatrix {
                count,
                trans,
                space,
                offset,
            };
            let mut inst = build(op, i, &regs, [].into_iter());
            inst.n_srcs = 1;
            inst
        };
        inst.srcs[0] = base;
        Ok(inst)
    }

    fn cp_async(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        m.has("async");
        if m.has("commit_group") {
            if !i.operands.is_empty() {
                return Err(count_error(i, "0"));
            }
            return Ok(Inst::new(Op::CpAsyncCommit, i.span));
        }
        if m.has("wait_all") {
            if !i.operands.is_empty() {
                return Err(count_error(i, "0"));
            }
            return Ok(Inst::new(
                Op::CpAsyncWait {
                    groups: 0,
                    all: true,
                },
                i.span,
            ));
        }
        if m.has("wait_group") {
            let [n] = i.operands.as_slice() else {
                return Err(count_error(i, "1"));
            };
            let K::Int(v) = n.kind else {
                return Err(bad(i, "an integer constant number of groups", n.span));
            };
            let groups =
                u8::try_from(v).map_err(|_| bad(i, "a number of groups in 0..=255", n.span))?;
            return Ok(Inst::new(Op::CpAsyncWait { groups, all: false }, i.span));
        }
        let bypass_l1 = m.one_of(&[("ca", false), ("cg", true)]).ok_or_else(|| {
            if m_has_any(i, &["mbarrier", "bulk"]) {
                LowerError::UnsupportedInstruction {
                    name: full_name(i),
                    span: i.span,
                }
            } else {
                m.missing("`.ca` or `.cg`")
            }
        })?;
        if m.one_of(SHARED).is_none() || !m.has("global") {
            return Err(m.missing("`.shared.global`"));
        }
        m.accept(&["L2::64B", "L2::128B", "L2::256B"]);
        let cache_hint = m.has("L2::cache_hint");
        let mut ops: Vec<&ast::Operand> = i.operands.iter().collect();
        if cache_hint {
            // The policy register is read (so it must exist) and otherwise ignored.
            let policy = ops.pop().ok_or_else(|| count_error(i, "4 or 5"))?;
            self.src(i, policy, Ty::B64)?;
        }
        let (dst, src, size, extra) = match ops.as_slice() {
            [d, s, n] => (*d, *s, *n, None),
            [d, s, n, e] => (*d, *s, *n, Some(*e)),
            _ => return Err(count_error(i, "3 or 4")),
        };
        let bytes = match size.kind {
            K::Int(4) => 4u8,
            K::Int(8) => 8,
            K::Int(16) => 16,
            _ => return Err(bad(i, "a copy size of 4, 8 or 16 bytes", size.span)),
        };
        if bypass_l1 && bytes != 16 {
            return Err(bad(i, "a copy size of 16 bytes for `.cg`", size.span));
        }
        let (_, dbase, dst_offset) = self.address(i, dst, Some(Space::Shared))?;
        let (_, sbase, src_offset) = self.address(i, src, Some(Space::Global))?;
        let mut inst = Inst::new(Op::Nop, i.span);
        inst.srcs[0] = dbase;
        inst.srcs[1] = sbase;
        inst.n_srcs = 2;
        let (mut src_size, mut ignore_src) = (false, false);
        if let Some(e) = extra {
            // The fourth operand is a predicate (`ignore-src`) or the bytes to read.
            let pred = matches!(&e.kind, K::Ident { name, .. }
                if matches!(self.lookup(name), Some(super::Sym::Reg(r)) if self.regs[r].ty == Ty::Pred));
            inst.srcs[2] = if pred {
                ignore_src = true;
                self.src(i, e, Ty::Pred)?
            } else {
                src_size = true;
                self.src(i, e, Ty::U32)?
            };
            inst.n_srcs = 3;
        }
        inst.op = Op::CpAsync {
            bytes,
            bypass_l1,
            dst_offset,
            src_offset,
            src_size,
            ignore_src,
        };
        Ok(inst)
    }

    /// The `mbarrier` family (PTX ISA §9.7.13.15): memory-ordering and scope qualifiers are
    /// accepted (the functional core is sequentially consistent; there are no clusters).
    fn mbarrier(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        m.accept(&["acquire", "release", "relaxed", "cta", "cluster"]);
        let arrive = m.one_of(&[("arrive", false), ("arrive_drop", true)]);
        let op = if let Some(drop) = arrive {
            MbarrierOp::Arrive {
                drop,
                expect_tx: m.has("expect_tx"),
                no_complete: m.has("noComplete"),
            }
        } else if m.has("init") {
            MbarrierOp::Init
        } else if m.has("inval") {
            MbarrierOp::Inval
        } else if m.has("pending_count") {
            MbarrierOp::PendingCount
        } else if m.has("expect_tx") {
            MbarrierOp::ExpectTx
        } else if m.has("complete_tx") {
            MbarrierOp::CompleteTx
        } else if m.one_of(&[("test_wait", ()), ("try_wait", ())]).is_some() {
            MbarrierOp::Wait {
                parity: m.has("parity"),
            }
        } else {
            return Err(LowerError::UnsupportedInstruction {
                name: full_name(i),
                span: i.span,
            });
        };
        let space = m.one_of(SHARED);
        m.need_ty(&[Ty::B64])?;
        let ops = i.operands.as_slice();
        if op == MbarrierOp::PendingCount {
            let [d, state] = ops else {
                return Err(count_error(i, "2"));
            };
            let mut inst = Inst::new(
                Op::Mbarrier {
                    op,
                    space: Space::Shared,
                    offset: 0,
                },
                i.span,
            );
            inst.dsts[0] = self.dst(i, d, Ty::U32, Rule::Exact)?;
            inst.n_dsts = 1;
            inst.srcs[0] = self.src(i, state, Ty::B64)?;
            inst.n_srcs = 1;
            return Ok(inst);
        }
        // (destination, address, further sources and their types)
        let (dst, addr, rest): (Option<Typed>, &ast::Operand, Vec<Typed>) = match (op, ops) {
            (MbarrierOp::Init, [a, n]) => (None, a, vec![(n, Ty::U32)]),
            (MbarrierOp::Inval, [a]) => (None, a, vec![]),
            (MbarrierOp::ExpectTx | MbarrierOp::CompleteTx, [a, n]) => {
                (None, a, vec![(n, Ty::U32)])
            }
            (
                MbarrierOp::Arrive {
                    expect_tx: false,
                    no_complete: false,
                    ..
                },
                [d, a],
            ) => (Some((d, Ty::B64)), a, vec![]),
            (MbarrierOp::Arrive { .. }, [d, a, n]) => (Some((d, Ty::B64)), a, vec![(n, Ty::U32)]),
            (MbarrierOp::Wait { parity }, [p, a, s, ..]) if ops.len() <= 4 => {
                // try_wait may add a suspend-time hint, which the model ignores.
                let hint: Vec<_> = ops.get(3).map(|h| (h, Ty::U32)).into_iter().collect();
                let mut rest = vec![(s, if parity { Ty::U32 } else { Ty::B64 })];
                rest.extend(hint);
                (Some((p, Ty::Pred)), a, rest)
            }
            _ => return Err(count_error(i, "the operands of this mbarrier form")),
        };
        let (space, base, offset) = self.address(i, addr, space)?;
        let mut inst = Inst::new(Op::Mbarrier { op, space, offset }, i.span);
        if let Some((d, ty)) = dst {
            inst.dsts[0] = self.dst(i, d, ty, Rule::Exact)?;
            inst.n_dsts = 1;
        }
        inst.srcs[0] = base;
        for (k, (o, ty)) in rest.iter().enumerate() {
            inst.srcs[k + 1] = self.src(i, o, *ty)?;
        }
        inst.n_srcs = 1 + rest.len() as u8;
        Ok(inst)
    }

    /// `cp.async.mbarrier.arrive{.noinc}{.shared}.b64 [addr]`.
    fn cp_async_mbarrier(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        m.has("async");
        m.has("mbarrier");
        if !m.has("arrive") {
            return Err(m.missing("`.arrive`"));
        }
        let noinc = m.has("noinc");
        let space = m.one_of(SHARED);
        m.need_ty(&[Ty::B64])?;
        let [a] = i.operands.as_slice() else {
            return Err(count_error(i, "1"));
        };
        let (space, base, offset) = self.address(i, a, space)?;
        let mut inst = Inst::new(
            Op::Mbarrier {
                op: MbarrierOp::CpAsyncArrive { noinc },
                space,
                offset,
            },
            i.span,
        );
        inst.srcs[0] = base;
        inst.n_srcs = 1;
        Ok(inst)
    }

    fn cvt_pack(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        if i.modifiers.iter().any(|x| x.value == "tf32") {
            return self.cvt_tf32(i, m);
        }
        if i.modifiers
            .iter()
            .any(|x| x.value == "e4m3x2" || x.value == "e5m2x2")
        {
            return self.cvt_fp8(i, m);
        }
        let rounding = m
            .one_of(&[
                ("rn", Rounding::Nearest),
                ("rz", Rounding::Zero),
                ("rm", Rounding::Down),
                ("rp", Rounding::Up),
            ])
            .ok_or_else(|| m.missing("a rounding modifier such as `.rn`"))?;
        let relu = m.has("relu");
        let satfinite = m.has("satfinite");
        let dty = m.need_ty(&[Ty::F16x2, Ty::Bf16x2])?;
        m.need_ty(&[Ty::F32])?;
        let [d, a, b] = i.operands.as_slice() else {
            return Err(count_error(i, "3"));
        };
        let mut inst = Inst::new(
            Op::CvtPack {
                dty,
                rounding,
                relu,
                satfinite,
            },
            i.span,
        );
        inst.dsts[0] = self.dst(i, d, Ty::B32, Rule::Exact)?;
        inst.n_dsts = 1;
        inst.srcs[0] = self.src(i, a, Ty::F32)?;
        inst.srcs[1] = self.src(i, b, Ty::F32)?;
        inst.n_srcs = 2;
        Ok(inst)
    }
}

impl KernelLowerer<'_> {
    /// The FP8 conversions of [`Op::CvtFp8`]: the modifiers name the destination format
    /// first, then the source.
    fn cvt_fp8(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        const FORMATS: &[(&str, Fp8)] = &[("e4m3x2", Fp8::E4m3), ("e5m2x2", Fp8::E5m2)];
        if !m.has("rn") {
            return Err(m.missing("`.rn` (FP8 conversions round to nearest even)"));
        }
        let satfinite = m.has("satfinite");
        let relu = m.has("relu");
        // The destination type is written before the source type.
        let fp8_first = i
            .modifiers
            .iter()
            .find(|x| matches!(x.value.as_str(), "e4m3x2" | "e5m2x2" | "f16x2" | "f32"))
            .is_some_and(|x| x.value != "f16x2" && x.value != "f32");
        let format = m.one_of(FORMATS).expect("routed here for an FP8 type");
        let to_f16x2 = !fp8_first;
        let from_f16x2 = if to_f16x2 {
            m.need_ty(&[Ty::F16x2])?;
            false
        } else {
            if !satfinite {
                return Err(m.missing("`.satfinite` (required converting to FP8)"));
            }
            m.need_ty(&[Ty::F32, Ty::F16x2])? == Ty::F16x2
        };
        if to_f16x2 && satfinite {
            return Err(m.missing("no `.satfinite` converting from FP8"));
        }
        let op = Op::CvtFp8 {
            format,
            to_f16x2,
            from_f16x2,
            relu,
        };
        let mut inst = Inst::new(op, i.span);
        let (dst_ty, src_tys): (Ty, &[Ty]) = if to_f16x2 {
            (Ty::B32, &[Ty::B16])
        } else if from_f16x2 {
            (Ty::B16, &[Ty::B32])
        } else {
            (Ty::B16, &[Ty::F32, Ty::F32])
        };
        let [d, srcs @ ..] = i.operands.as_slice() else {
            return Err(count_error(i, "2 or 3"));
        };
        if srcs.len() != src_tys.len() {
            return Err(count_error(i, if src_tys.len() == 2 { "3" } else { "2" }));
        }
        inst.dsts[0] = self.dst(i, d, dst_ty, Rule::Exact)?;
        inst.n_dsts = 1;
        for (k, (o, &ty)) in srcs.iter().zip(src_tys).enumerate() {
            inst.srcs[k] = self.src(i, o, ty)?;
        }
        inst.n_srcs = srcs.len() as u8;
        Ok(inst)
    }

    /// `cvt.{rna,rn,rz}{.relu}{.satfinite}.tf32.f32 d, a` (the destination a `.b32`).
    fn cvt_tf32(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        let (rounding, away) = m
            .one_of(&[
                ("rna", (Rounding::Nearest, true)),
                ("rn", (Rounding::Nearest, false)),
                ("rz", (Rounding::Zero, false)),
            ])
            .ok_or_else(|| m.missing("`.rna`, `.rn` or `.rz`"))?;
        let relu = m.has("relu");
        let satfinite = m.has("satfinite");
        m.has("tf32");
        m.need_ty(&[Ty::F32])?;
        let [d, a] = i.operands.as_slice() else {
            return Err(count_error(i, "2"));
        };
        let mut inst = Inst::new(
            Op::CvtTf32 {
                rounding,
                away,
                relu,
                satfinite,
            },
            i.span,
        );
        inst.dsts[0] = self.dst(i, d, Ty::B32, Rule::Exact)?;
        inst.n_dsts = 1;
        inst.srcs[0] = self.src(i, a, Ty::F32)?;
        inst.n_srcs = 1;
        Ok(inst)
    }
}

/// An operand with the type the instruction gives it.
type Typed<'a> = (&'a ast::Operand, Ty);

/// An instruction with destinations `dsts` and register sources `srcs`.
fn build(op: Op, i: &ast::Instruction, dsts: &[Reg], srcs: impl Iterator<Item = Reg>) -> Inst {
    let mut inst = Inst::new(op, i.span);
    for (k, &r) in dsts.iter().enumerate() {
        inst.dsts[k] = Some(r);
    }
    inst.n_dsts = dsts.len() as u8;
    let mut n = 0;
    for r in srcs {
        debug_assert!(n < MAX_SRCS);
        inst.srcs[n] = Operand::Reg(r);
        n += 1;
    }
    inst.n_srcs = n as u8;
    inst
}

/// The shape modifier (`.m16n8k16`).
fn shape(i: &ast::Instruction, m: &mut Mods) -> Result<MmaShape, LowerError> {
    let found = i
        .modifiers
        .iter()
        .find_map(|x| MmaShape::from_name(&x.value).map(|s| (s, x.value.clone())));
    let Some((s, name)) = found else {
        return Err(m.missing("a shape such as `.m16n8k16`"));
    };
    m.accept(&[name.as_str()]);
    Ok(s)
}

/// The element-type modifiers, in order.
fn elems_any(m: &mut Mods) -> Vec<MmaElem> {
    let names = ["f16", "bf16", "tf32", "f32", "f64", "s8", "u8", "s32"];
    let table: Vec<(&str, MmaElem)> = names
        .iter()
        .map(|n| (*n, MmaElem::from_name(n).expect("listed")))
        .collect();
    let mut out = Vec::new();
    while let Some(e) = m.one_of(&table) {
        out.push(e);
    }
    out
}

/// Exactly `N` element-type modifiers.
fn elems<const N: usize>(i: &ast::Instruction, m: &mut Mods) -> Result<[MmaElem; N], LowerError> {
    let found = elems_any(m);
    <[MmaElem; N]>::try_from(found).map_err(|found| LowerError::UnsupportedInstruction {
        name: format!(
            "{} ({} element types where {N} are expected, or an unsupported type)",
            full_name(i),
            found.len()
        ),
        span: i.span,
    })
}

fn m_has_any(i: &ast::Instruction, names: &[&str]) -> bool {
    i.modifiers
        .iter()
        .any(|m| names.contains(&m.value.as_str()))
}
