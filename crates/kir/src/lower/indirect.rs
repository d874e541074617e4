//! Indirect control flow: `brx.idx` through a `.branchtargets` list, and `call` through a
//! function address with a `.calltargets` list, a call table or a `.callprototype`
//! (PTX ISA §9.7.13.2, §9.7.13.4, §11.3).
//!
//! The IR has single-target branches only and inlines every call, so both lower to a
//! dispatch chain: for each possible target, a compare of the index or address and a branch
//! guarded by it, then [`Op::UnmatchedTarget`] for a value no entry matched (the ISA leaves
//! an out-of-range `brx.idx` undefined and an indirect call to a function outside its list
//! invalid; the simulator stops with an error naming the value). An indirect call's
//! possible callees are each inlined once behind the chain and rejoin after it.
//!
//! Lanes that pick different targets diverge at the chain's branches and reconverge at its
//! end, as they would at a hardware `BRX`; the chain costs up to two IR instructions per
//! table entry where the hardware issues one indirect branch.

use std::collections::HashMap;

use ptx::ast::{self, OperandKind as K, StateSpace, Statement};
use ptx::Span;

use super::decode::{bad, count_error};
use super::{KernelLowerer, LowerError, Sym};
use crate::ids::{InstId, Reg};
use crate::inst::{BoolOp, Cmp, Guard, IndirectKind, Inst, Op, Operand, Ty};
use crate::module::RegInfo;

/// The functions whose address a module takes, in declaration order: those named in a
/// global's initializer and those named by an instruction other than as a direct call's
/// callee. These are the possible callees of a call through a `.callprototype`.
pub(super) fn address_taken<'m>(
    module: &ast::Module,
    function_order: &[&'m str],
    call_tables: &HashMap<String, Vec<String>>,
) -> Vec<&'m str> {
    let mut named: std::collections::HashSet<&str> =
        call_tables.values().flatten().map(String::as_str).collect();
    fn operand<'o>(o: &'o ast::Operand, out: &mut std::collections::HashSet<&'o str>) {
        match &o.kind {
            K::Ident { name, .. } => {
                out.insert(name);
            }
            K::Vector(v) | K::List(v) => v.iter().for_each(|x| operand(x, out)),
            _ => {}
        }
    }
    fn block<'o>(b: &'o ast::Block, out: &mut std::collections::HashSet<&'o str>) {
        for s in &b.statements {
            match s {
                Statement::Instruction(i) => {
                    // A direct call's callee is its first operand that is not a list.
                    let callee = (i.opcode.value == "call")
                        .then(|| {
                            i.operands
                                .iter()
                                .position(|o| !matches!(o.kind, K::List(_)))
                        })
                        .flatten();
                    for (k, o) in i.operands.iter().enumerate() {
                        if Some(k) != callee {
                            operand(o, out);
                        }
                    }
                }
                Statement::Block(inner) => block(inner, out),
                _ => {}
            }
        }
    }
    for item in &module.items {
        if let ast::Item::Function(f) = item {
            if let Some(b) = &f.body {
                block(b, &mut named);
            }
        }
    }
    function_order
        .iter()
        .copied()
        .filter(|f| named.contains(f))
        .collect()
}

/// Whether a function's results and parameters match a prototype's: the same count, and
/// each in the same state space with the same size.
fn matches_prototype(f: &ast::Function, p: &ast::CallPrototype) -> bool {
    fn same(a: &[ast::ParamDecl], b: &[ast::ParamDecl]) -> bool {
        let size =
            |d: &ast::ParamDecl| (d.ty.size() as u64).saturating_mul(d.array_len.unwrap_or(1));
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| x.space == y.space && size(x) == size(y))
    }
    same(&f.returns, &p.returns) && same(&f.params, &p.params)
}

impl<'a> KernelLowerer<'a> {
    /// A fresh predicate register for a dispatch chain.
    fn chain_pred(&mut self, what: &str) -> Reg {
        let prefix = self
            .frames
            .last()
            .map(|f| f.prefix.clone())
            .unwrap_or_default();
        self.inline_count += 1;
        self.regs.push(RegInfo {
            name: format!("{prefix}%{what}#{}", self.inline_count),
            ty: Ty::Pred,
        })
    }

    /// `setp.eq.ty q, value, key` (`and`-combined with the guard) and `@q bra label`.
    fn dispatch_entry(
        &mut self,
        q: Reg,
        value: Operand,
        ty: Ty,
        key: u64,
        guard: Option<Guard>,
        label: u32,
        span: Span,
    ) {
        let mut setp = Inst::new(
            Op::Setp {
                cmp: Cmp::Eq,
                combine: guard.map(|_| BoolOp::And),
                ty,
                ftz: false,
            },
            span,
        );
        setp.dsts[0] = Some(q);
        setp.n_dsts = 1;
        setp.srcs[0] = value;
        setp.srcs[1] = Operand::Imm(key);
        setp.n_srcs = 2;
        if let Some(g) = guard {
            setp.srcs[2] = if g.negated {
                Operand::NotReg(g.reg)
            } else {
                Operand::Reg(g.reg)
            };
            setp.n_srcs = 3;
        }
        self.push(setp);
        self.fixups.push((self.insts.len(), label));
        let mut bra = Inst::new(
            Op::Bra {
                target: InstId(u32::MAX),
                uni: false,
            },
            span,
        );
        bra.guard = Some(Guard {
            reg: q,
            negated: false,
        });
        self.push(bra);
    }

    /// The end of a chain: a value that matched no entry stops the kernel with an error.
    fn unmatched(&mut self, kind: IndirectKind, value: Operand, guard: Option<Guard>, span: Span) {
        let mut inst = Inst::new(Op::UnmatchedTarget(kind), span);
        inst.srcs[0] = value;
        inst.n_srcs = 1;
        inst.guard = guard;
        self.push(inst);
    }

    /// `@p brx.idx{.uni} index, tlist;`
    pub(super) fn brx(
        &mut self,
        i: &'a ast::Instruction,
        guard: Option<Guard>,
    ) -> Result<(), LowerError> {
        let mut m = super::decode::Mods::new(i);
        if !m.has("idx") {
            return Err(m.missing("`.idx`"));
        }
        m.has("uni");
        m.finish()?;
        let [index, list] = i.operands.as_slice() else {
            return Err(count_error(i, "2"));
        };
        let value = self.src(i, index, Ty::U32)?;
        let K::Ident { name, .. } = &list.kind else {
            return Err(bad(i, "the label of a `.branchtargets` list", list.span));
        };
        let targets = match self.lookup(name) {
            Some(Sym::Targets(t))
                if self.target_lists[t as usize].kind == ast::TargetKind::Branch =>
            {
                self.target_lists[t as usize]
            }
            _ => return Err(bad(i, "the label of a `.branchtargets` list", list.span)),
        };
        let mut labels = Vec::with_capacity(targets.targets.len());
        for t in &targets.targets {
            match self.lookup(&t.value) {
                Some(Sym::Label(id)) => labels.push(id),
                _ => {
                    return Err(LowerError::UnknownLabel {
                        name: t.value.clone(),
                        span: t.span,
                    })
                }
            }
        }
        let q = self.chain_pred("brx");
        for (k, label) in labels.into_iter().enumerate() {
            self.dispatch_entry(q, value, Ty::U32, k as u64, guard, label, i.span);
        }
        self.unmatched(IndirectKind::Branch, value, guard, i.span);
        Ok(())
    }

    /// `call (rets), fptr, (args), flist|fproto;`: `fptr` is the operand after the results,
    /// `table` the list or prototype after the arguments.
    pub(super) fn indirect_call(
        &mut self,
        i: &'a ast::Instruction,
        fptr: &'a ast::Operand,
        rets: &'a [ast::Operand],
        args: &'a [ast::Operand],
        table: &'a ast::Operand,
    ) -> Result<(), LowerError> {
        let value = self.src(i, fptr, Ty::U64)?;
        let K::Ident { name, .. } = &table.kind else {
            return Err(bad(
                i,
                "a `.calltargets` label, a call table or a `.callprototype` label",
                table.span,
            ));
        };
        let callees: Vec<&'a str> = match self.lookup(name) {
            Some(Sym::Targets(t))
                if self.target_lists[t as usize].kind == ast::TargetKind::Call =>
            {
                let list = self.target_lists[t as usize];
                let mut callees = Vec::new();
                for f in &list.targets {
                    match self.ctx.functions.get(f.value.as_str()) {
                        Some(func) if func.body.is_some() => callees.push(func.name.value.as_str()),
                        _ => {
                            return Err(LowerError::UnknownFunction {
                                name: f.value.clone(),
                                span: f.span,
                            })
                        }
                    }
                }
                callees
            }
            Some(Sym::Prototype(p)) => {
                let proto = self.prototypes[p as usize];
                if proto.returns.len() != rets.len() || proto.params.len() != args.len() {
                    return Err(LowerError::OperandCount {
                        inst: format!("call through `{name}`"),
                        expected: format!(
                            "{} results and {} arguments",
                            proto.returns.len(),
                            proto.params.len()
                        ),
                        found: rets.len() + args.len(),
                        span: i.span,
                    });
                }
                self.ctx
                    .address_taken
                    .iter()
                    .filter_map(|f| self.ctx.functions.get(f))
                    .filter(|f| f.body.is_some() && matches_prototype(f, proto))
                    .map(|f| f.name.value.as_str())
                    .collect()
            }
            Some(Sym::Global(_)) if self.ctx.call_tables.contains_key(name) => {
                let ctx = self.ctx;
                let mut callees = Vec::new();
                for f in &ctx.call_tables[name] {
                    match ctx.functions.get(f.as_str()) {
                        Some(func) if func.body.is_some() => callees.push(func.name.value.as_str()),
                        _ => {
                            return Err(LowerError::UnknownFunction {
                                name: f.clone(),
                                span: table.span,
                            })
                        }
                    }
                }
                callees
            }
            _ => {
                return Err(bad(
                    i,
                    "a `.calltargets` label, a call table or a `.callprototype` label",
                    table.span,
                ))
            }
        };
        if !self.inline_calls {
            // Checking a function on its own: each callee is checked on its own, and its
            // arguments against its declaration.
            for callee in callees {
                self.check_call_operands(i, callee, rets, args)?;
            }
            return Ok(());
        }
        let q = self.chain_pred("call");
        let labels: Vec<u32> = callees
            .iter()
            .map(|f| self.new_label(&format!("{f}.indirect"), i.span))
            .collect();
        for (callee, &label) in callees.iter().zip(&labels) {
            let Some(Sym::Function(addr)) = self.lookup(callee) else {
                unreachable!("every function has an address");
            };
            self.dispatch_entry(q, value, Ty::U64, addr, None, label, i.span);
        }
        self.unmatched(IndirectKind::Call, value, None, i.span);
        let end = self.new_label("indirect.return", i.span);
        for (callee, &label) in callees.iter().zip(&labels) {
            self.place_label(label);
            self.inline_call(callee, fptr.span, rets, args, i.span)?;
            self.fixups.push((self.insts.len(), end));
            self.push(Inst::new(
                Op::Bra {
                    target: InstId(u32::MAX),
                    uni: false,
                },
                i.span,
            ));
        }
        self.place_label(end);
        Ok(())
    }

    /// Checks that a call's results and arguments fit a callee's declaration (used where the
    /// call is checked but not inlined).
    pub(super) fn check_call_operands(
        &self,
        i: &ast::Instruction,
        callee: &str,
        rets: &[ast::Operand],
        args: &[ast::Operand],
    ) -> Result<(), LowerError> {
        let f = self.ctx.functions[callee];
        if f.returns.len() != rets.len() || f.params.len() != args.len() {
            return Err(LowerError::OperandCount {
                inst: format!("call {callee}"),
                expected: format!(
                    "{} results and {} arguments",
                    f.returns.len(),
                    f.params.len()
                ),
                found: rets.len() + args.len(),
                span: i.span,
            });
        }
        for (decl, actual) in f
            .returns
            .iter()
            .chain(&f.params)
            .zip(rets.iter().chain(args))
        {
            let sym = match &actual.kind {
                K::Ident { name: a, .. } => self.lookup(a),
                _ => None,
            };
            if !matches!(
                (decl.space, sym),
                (StateSpace::Param, Some(Sym::ParamVar(_))) | (StateSpace::Reg, Some(Sym::Reg(_)))
            ) {
                return Err(LowerError::BadOperand {
                    inst: "call".into(),
                    expected: "`.param` variables for `.param` parameters, registers for `.reg` parameters",
                    span: actual.span,
                });
            }
        }
        Ok(())
    }
}
