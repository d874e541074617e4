//! Load-time checks: every instruction the machine will execute must be one it implements for
//! the types it names, so that nothing unsupported is discovered halfway through a run.

use kir::inst::{AtomOp, Op, Ty};
use kir::Module;
use ptx::Span;

use crate::alu;

/// Problems found in a lowered module, as (span, message).
pub fn check_module(m: &Module) -> Vec<(Span, String)> {
    let mut problems = Vec::new();
    for k in m.kernels.values() {
        for inst in k.insts.values() {
            match inst.op {
                Op::Arith { op, ty, mode } => {
                    if let Err(e) = alu::arith(op, ty, mode, 0, 0, 0, 0) {
                        problems.push((inst.span, format!("unsupported instruction: {e}")));
                    }
                }
                Op::Atom { op, ty, .. } | Op::Red { op, ty, .. } => {
                    let float_ok = matches!(
                        op,
                        AtomOp::Add | AtomOp::Exch | AtomOp::Min | AtomOp::Max | AtomOp::Cas
                    );
                    if (ty == Ty::F32 || ty == Ty::F64) && !float_ok {
                        problems.push((
                            inst.span,
                            format!("unsupported instruction: atomic `{op:?}` on `.{ty:?}`")
                                .to_lowercase(),
                        ));
                    }
                    // 16 bits: `atom.cas.b16` (sm_70) and the half-precision float forms
                    // (`atom.add.noftz.f16`, `min`/`max` of `.f16`/`.bf16`).
                    let half = match ty {
                        Ty::B16 => op == AtomOp::Cas,
                        Ty::F16 | Ty::Bf16 => {
                            matches!(op, AtomOp::Add | AtomOp::Min | AtomOp::Max)
                        }
                        _ => false,
                    };
                    if !matches!(ty.size(), 4 | 8) && !half {
                        problems.push((
                            inst.span,
                            format!(
                                "unsupported instruction: atomic on a {}-byte type",
                                ty.size()
                            ),
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    problems
}
