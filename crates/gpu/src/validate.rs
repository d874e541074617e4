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
                    if !matches!(ty.size(), 4 | 8) {
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
