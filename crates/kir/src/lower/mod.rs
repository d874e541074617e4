//! Lowering from the PTX syntax tree to the kernel IR.
//!
//! * Names are resolved through a stack of scopes (`{ ... }` blocks nest; an inlined callee
//!   sees only its own scopes and the module scope).
//! * Shared memory is laid out per kernel: the static `.shared` variables the kernel (and the
//!   functions it calls) actually reference, in declaration order, then dynamic shared memory
//!   (`.extern .shared`) at the first 16-byte-aligned offset after them.
//! * Per-thread local memory holds `.local` variables and the `.param` variables that call
//!   sites declare to pass arguments; a call is inlined, and the callee's `.param` parameters
//!   become aliases of the caller's argument variables.
//! * Every instruction is decoded strictly: an unknown opcode or modifier is an error with its
//!   span, and lowering goes on to report the others too. Operands and types are checked
//!   against the PTX ISA's rules ([`typecheck`]).
//! * Every `.func` body is checked on its own too, called or not (its calls are checked but
//!   not inlined), so that dead code cannot hide invalid PTX.

mod decode;
mod error;
mod indirect;
mod tensor;
mod texture;
mod typecheck;

use std::collections::{HashMap, HashSet};

use ptx::ast::{self, InitExpr, Initializer, StateSpace, Statement};
use ptx::Span;

pub use error::{LowerError, LowerWarning};

use crate::cfg::Cfg;
use crate::ids::{GlobalId, IdVec, InstId, Reg};
use crate::inst::{Inst, Op, Ty};
use crate::module::{
    GlobalSpace, GlobalVar, Kernel, LaunchBounds, Module, Param, RegInfo, Relocation,
    FUNCTION_ADDRESS_BASE, FUNCTION_ADDRESS_STRIDE,
};

/// What `ptxas` refuses in a function's signature: a second definition of its name, two
/// parameters of one name, a dimension of zero in `.reqntid` / `.maxntid`.
fn check_signature<'a>(
    f: &'a ast::Function,
    defined: &mut HashSet<&'a str>,
    errors: &mut Vec<LowerError>,
) {
    if f.body.is_some() && !defined.insert(f.name.value.as_str()) {
        errors.push(LowerError::Redeclared {
            name: f.name.value.clone(),
            span: f.name.span,
        });
    }
    let mut names = HashSet::new();
    for p in f.returns.iter().chain(&f.params) {
        if !names.insert(p.name.value.as_str()) {
            errors.push(LowerError::Redeclared {
                name: p.name.value.clone(),
                span: p.name.span,
            });
        }
    }
    for d in &f.performance {
        let (ast::Performance::ReqNtid(dims) | ast::Performance::MaxNtid(dims)) = &d.value else {
            continue;
        };
        // ptxas requires every dimension to be positive (and leaves a block too large for
        // the device to the launch, which refuses it).
        if dims.contains(&0) {
            let name = match d.value {
                ast::Performance::ReqNtid(_) => "reqntid",
                _ => "maxntid",
            };
            errors.push(LowerError::Invalid {
                what: format!(
                    "`.{name} {}`: every dimension must be at least 1",
                    dims.iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                span: d.span,
            });
        }
    }
}

/// Lowers a parsed module. On failure returns every error found (in source order).
pub fn lower_module(module: &ast::Module, source_name: &str) -> Result<Module, Vec<LowerError>> {
    let mut errors = Vec::new();
    if module.address_size != 64 {
        errors.push(LowerError::AddressSize {
            size: module.address_size,
            span: Span::default(),
        });
        return Err(errors);
    }
    let mut globals: IdVec<GlobalId, GlobalVar> = IdVec::new();
    let mut module_syms: HashMap<String, ModuleSym> = HashMap::new();
    let mut functions: HashMap<&str, &ast::Function> = HashMap::new();
    let mut shared_decls: Vec<&ast::VarDecl> = Vec::new();
    let mut function_order: Vec<&str> = Vec::new();
    let mut call_tables: HashMap<String, Vec<String>> = HashMap::new();
    let mut warnings: Vec<LowerWarning> = Vec::new();
    // Functions with a body so far: a second definition is an error (prototypes are not).
    let mut defined: HashSet<&str> = HashSet::new();

    for item in &module.items {
        match item {
            ast::Item::Var(v) => match v.space {
                StateSpace::Global | StateSpace::Const => {
                    let space = if v.space == StateSpace::Const {
                        GlobalSpace::Const
                    } else {
                        GlobalSpace::Global
                    };
                    let size = var_size(v);
                    let id = globals.push(GlobalVar {
                        name: v.name.value.clone(),
                        space,
                        size,
                        align: var_align(v),
                        init: vec![0; size as usize],
                        relocations: Vec::new(),
                        span: v.span,
                    });
                    module_syms.insert(v.name.value.clone(), ModuleSym::Global(id));
                }
                StateSpace::Shared => {
                    shared_decls.push(v);
                    module_syms.insert(v.name.value.clone(), ModuleSym::Shared);
                }
                _ => errors.push(LowerError::UnsupportedDeclaration {
                    what: format!("module-scope variable in `.{:?}` space", v.space),
                    span: v.span,
                }),
            },
            ast::Item::Function(f) => {
                check_signature(f, &mut defined, &mut errors);
                if !functions.contains_key(f.name.value.as_str()) {
                    // A function's address: its place among the module's functions.
                    let addr = FUNCTION_ADDRESS_BASE
                        + FUNCTION_ADDRESS_STRIDE * function_order.len() as u64;
                    function_order.push(f.name.value.as_str());
                    module_syms
                        .entry(f.name.value.clone())
                        .or_insert(ModuleSym::Function(addr));
                }
                if f.body.is_some() || !functions.contains_key(f.name.value.as_str()) {
                    functions.insert(f.name.value.as_str(), f);
                }
            }
        }
    }
    // Initializers, now that every global has an id (they may take each other's address).
    for item in &module.items {
        if let ast::Item::Var(v) = item {
            if let (Some(init), Some(ModuleSym::Global(id))) =
                (&v.init, module_syms.get(&v.name.value))
            {
                let mut g = globals[*id].clone();
                let mut offset = 0u64;
                let mut funcs = Vec::new();
                let mut out = InitOut {
                    g: &mut g,
                    offset: &mut offset,
                    functions: &mut funcs,
                    errors: &mut errors,
                    warnings: &mut warnings,
                };
                write_initializer(init, v.ty, &module_syms, &mut out);
                globals[*id] = g;
                if !funcs.is_empty() {
                    call_tables.insert(v.name.value.clone(), funcs);
                }
            }
        }
    }

    let mut kernels = IdVec::new();
    let sm = module
        .target
        .iter()
        .find_map(|t| t.strip_prefix("sm_"))
        .and_then(|t| {
            t.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse::<u32>()
                .ok()
        })
        .unwrap_or(0);
    let address_taken = indirect::address_taken(module, &function_order, &call_tables);
    let kernel_warnings = std::cell::RefCell::new(Vec::new());
    let ctx = ModuleCtx {
        sync_required: sm >= 70 && module.version >= (6, 4),
        syms: &module_syms,
        functions: &functions,
        shared_decls: &shared_decls,
        call_tables: &call_tables,
        address_taken: &address_taken,
        warnings: &kernel_warnings,
    };
    for item in &module.items {
        let ast::Item::Function(f) = item else {
            continue;
        };
        if f.body.is_none() {
            continue;
        }
        match (f.kind, KernelLowerer::lower(&ctx, f)) {
            (ast::FunctionKind::Entry, Ok(k)) => {
                kernels.push(k);
            }
            // A `.func` lowered on its own is only checked; kernels inline it.
            (ast::FunctionKind::Func, Ok(_)) => {}
            (_, Err(mut e)) => errors.append(&mut e),
        }
    }
    if errors.is_empty() {
        Ok(Module {
            source_name: source_name.to_string(),
            warnings: {
                warnings.extend(kernel_warnings.take());
                // A function's warning is found again in every kernel that inlines it.
                warnings.sort_by_key(|w| w.span.start);
                warnings.dedup();
                warnings
            },
            version: module.version,
            target: module.target.clone(),
            kernels,
            globals,
        })
    } else {
        errors.sort_by_key(|e| e.span().start);
        // A function's error is found again in every kernel that inlines it.
        let mut seen = HashSet::new();
        errors.retain(|e| seen.insert((e.span(), e.to_string())));
        Err(errors)
    }
}

#[derive(Clone, Copy, Debug)]
enum ModuleSym {
    Global(GlobalId),
    /// A module-scope `.shared` variable; its offset depends on the kernel.
    Shared,
    /// A function, at its code address (see [`FUNCTION_ADDRESS_BASE`]).
    Function(u64),
}

struct ModuleCtx<'a> {
    /// `vote` and `shfl` must be `.sync` (PTX ISA 6.4 and later on sm_70 and later).
    sync_required: bool,
    syms: &'a HashMap<String, ModuleSym>,
    functions: &'a HashMap<&'a str, &'a ast::Function>,
    shared_decls: &'a [&'a ast::VarDecl],
    /// Global arrays initialised with function names (call tables), by name: their functions.
    call_tables: &'a HashMap<String, Vec<String>>,
    /// Functions whose address the module takes, in declaration order: the possible callees
    /// of an indirect call through a `.callprototype`.
    address_taken: &'a [&'a str],
    /// What is accepted but worth a word ([`LowerWarning`]), from every kernel.
    warnings: &'a std::cell::RefCell<Vec<LowerWarning>>,
}

fn var_align(v: &ast::VarDecl) -> u32 {
    v.align.unwrap_or(v.ty.size() * v.vector).max(1)
}

/// Bytes of a variable; saturates instead of overflowing (a size that large is then
/// rejected against its limit).
fn var_size(v: &ast::VarDecl) -> u64 {
    let elems = v
        .array_dims
        .iter()
        .fold(1u64, |n, d| n.saturating_mul(d.unwrap_or(0)));
    (v.ty.size() as u64)
        .saturating_mul(v.vector as u64)
        .saturating_mul(elems)
}

/// Local memory one thread may declare: CUDA's limit of 512 KiB per thread.
pub const MAX_LOCAL_BYTES: u64 = 512 * 1024;
/// Static shared memory one kernel may declare (1 MiB, beyond any GPU's 228 KiB: whether it
/// fits is checked at launch against the GPU; this bound keeps sizes meaningful).
pub const MAX_STATIC_SHARED_BYTES: u64 = 1 << 20;
/// Registers one function may declare, counting every `%r<N>` range (2^18): a declaration
/// costs memory in every analysis whether or not the registers are used.
pub const MAX_DECLARED_REGISTERS: u64 = 1 << 18;

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a.max(1)) * a.max(1)
}

/// Where [`write_initializer`] writes: the variable, the next byte, the functions whose
/// addresses it stores, and errors.
struct InitOut<'o> {
    g: &'o mut GlobalVar,
    offset: &'o mut u64,
    functions: &'o mut Vec<String>,
    errors: &'o mut Vec<LowerError>,
    warnings: &'o mut Vec<LowerWarning>,
}

fn write_initializer(
    init: &Initializer,
    ty: Ty,
    syms: &HashMap<String, ModuleSym>,
    out: &mut InitOut,
) {
    match init {
        Initializer::List(items) => {
            for i in items {
                write_initializer(i, ty, syms, out);
            }
        }
        Initializer::Expr(e) => {
            let size = ty.size() as u64;
            let bits: u64 = match &e.value {
                InitExpr::Int(v) => {
                    let bits = decode::int_literal_bits(*v, ty);
                    if !ty.is_float() && !typecheck::int_fits(*v, ty) {
                        let name = typecheck::name(ty);
                        match error::wrapped_literal(&out.g.name, *v, &name, bits, e.span) {
                            Some(w) => out.warnings.push(w),
                            None => out.errors.push(LowerError::ImmediateRange {
                                inst: out.g.name.clone(),
                                value: *v,
                                ty: name,
                                span: e.span,
                            }),
                        }
                    }
                    bits
                }
                InitExpr::Float(f) => decode::float_literal_bits(*f, ty),
                InitExpr::SymbolAddr {
                    name,
                    offset: addend,
                    ..
                } => {
                    match syms.get(name) {
                        Some(ModuleSym::Global(target)) if size >= 4 => {
                            out.g.relocations.push(Relocation {
                                offset: *out.offset,
                                width: size as u8,
                                target: *target,
                                addend: *addend,
                            });
                        }
                        // A function's address is known now: a call table.
                        Some(ModuleSym::Function(addr)) if size == 8 => {
                            out.functions.push(name.clone());
                            return write_bits(
                                out,
                                addr.wrapping_add(*addend as u64),
                                size,
                                e.span,
                            );
                        }
                        _ => out.errors.push(LowerError::UnsupportedDeclaration {
                            what: format!("initializer taking the address of `{name}`"),
                            span: e.span,
                        }),
                    }
                    0
                }
            };
            write_bits(out, bits, size, e.span);
        }
    }
}

/// Writes the low `size` bytes of `bits` at the initializer's next byte.
fn write_bits(out: &mut InitOut, bits: u64, size: u64, span: Span) {
    let start = *out.offset as usize;
    let end = start + size as usize;
    if end <= out.g.init.len() {
        out.g.init[start..end].copy_from_slice(&bits.to_le_bytes()[..size as usize]);
    } else {
        out.errors.push(LowerError::UnsupportedDeclaration {
            what: format!("initializer longer than `{}`", out.g.name),
            span,
        });
    }
    *out.offset += size;
}

/// What a name means inside a function body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sym {
    Reg(Reg),
    /// Per-thread local memory at this byte offset.
    Local(u32),
    /// A `.param` variable of a call site or a device function's `.param` parameter: local
    /// memory at this byte offset, read and written only with `ld.param`/`st.param`.
    ParamVar(u32),
    /// Shared memory at this byte offset.
    Shared(u32),
    /// The kernel's parameter buffer at this byte offset.
    KernelParam(u32),
    Global(GlobalId),
    Label(u32),
    /// A function, at its code address.
    Function(u64),
    /// A `.branchtargets` or `.calltargets` list (index into `target_lists`).
    Targets(u32),
    /// A `.callprototype` (index into `prototypes`).
    Prototype(u32),
}

struct Scope {
    names: HashMap<String, Sym>,
    /// An inlined function's outermost scope: lookups stop here and go to module scope.
    function_root: bool,
}

/// State of one inlined function instance (the kernel itself is the first).
struct FrameCtx {
    /// Name prefix for registers (`""` for the kernel, `"callee#3::"` for an instance).
    prefix: String,
    /// Where `ret` goes; `None` in the kernel itself (`ret` exits).
    ret_label: Option<u32>,
    /// The function's name, for static shared variables declared in its body.
    func_name: String,
}

struct KernelLowerer<'a> {
    ctx: &'a ModuleCtx<'a>,
    kernel_name: String,
    regs: IdVec<Reg, RegInfo>,
    insts: Vec<Inst>,
    scopes: Vec<Scope>,
    frames: Vec<FrameCtx>,
    /// Label id → instruction index once placed.
    label_pos: Vec<Option<u32>>,
    label_names: Vec<(String, Span)>,
    /// Branches to patch: (instruction index, label id).
    fixups: Vec<(usize, u32)>,
    /// Static shared layout: module-scope variable name or `func::var` → offset.
    shared_offsets: HashMap<String, u32>,
    static_smem: u32,
    dynamic_smem_base: u32,
    uses_dynamic_smem: bool,
    local_size: u32,
    inline_count: u32,
    /// False when a `.func` is lowered on its own to be checked: its calls are checked but
    /// not inlined (each callee is checked on its own).
    inline_calls: bool,
    errors: Vec<LowerError>,
    /// Register ranges whose declaration was rejected as too large (`%r`, 1000000000): their
    /// uses are not reported again as unknown identifiers.
    rejected_ranges: Vec<(String, u64)>,
    /// The condition code's carry flag, once a carry instruction needs it.
    cc: Option<Reg>,
    /// `.branchtargets`/`.calltargets` lists and `.callprototype`s declared so far.
    target_lists: Vec<&'a ast::TargetList>,
    prototypes: Vec<&'a ast::CallPrototype>,
}

impl<'a> KernelLowerer<'a> {
    fn lower(ctx: &'a ModuleCtx<'a>, f: &'a ast::Function) -> Result<Kernel, Vec<LowerError>> {
        let mut l = KernelLowerer {
            ctx,
            kernel_name: f.name.value.clone(),
            regs: IdVec::new(),
            insts: Vec::new(),
            scopes: Vec::new(),
            frames: Vec::new(),
            label_pos: Vec::new(),
            label_names: Vec::new(),
            fixups: Vec::new(),
            shared_offsets: HashMap::new(),
            static_smem: 0,
            dynamic_smem_base: 0,
            uses_dynamic_smem: false,
            local_size: 0,
            inline_count: 0,
            inline_calls: f.kind == ast::FunctionKind::Entry,
            errors: Vec::new(),
            rejected_ranges: Vec::new(),
            cc: None,
            target_lists: Vec::new(),
            prototypes: Vec::new(),
        };
        l.layout_shared(f);

        // Parameters.
        let mut params = Vec::new();
        let mut param_size = 0u64;
        let mut root = Scope {
            names: HashMap::new(),
            function_root: true,
        };
        if f.kind == ast::FunctionKind::Func {
            // A device function's `.param` parameters and results live in local memory
            // (as an inlined call's arguments do); `.reg` ones are registers.
            l.scopes.push(root);
            for p in f.returns.iter().chain(&f.params) {
                if p.space == StateSpace::Reg {
                    l.new_reg("", &p.name.value, p.ty, p.name.span);
                } else {
                    let size = (p.ty.size() as u64).saturating_mul(p.array_len.unwrap_or(1));
                    let off =
                        l.alloc_local(size, p.align.unwrap_or(p.ty.size()).max(1), p.name.span);
                    l.declare(&p.name.value, Sym::ParamVar(off), p.name.span);
                }
            }
            root = l.scopes.pop().expect("pushed above");
        }
        for p in f
            .params
            .iter()
            .filter(|_| f.kind == ast::FunctionKind::Entry)
        {
            let size = p.ty.size() as u64 * p.array_len.unwrap_or(1);
            let align = p.align.unwrap_or(p.ty.size()).max(1);
            let offset = align_up(param_size, align as u64);
            param_size = offset + size;
            params.push(Param {
                name: p.name.value.clone(),
                ty: p.ty,
                offset: offset as u32,
                size: size as u32,
                align,
            });
            root.names
                .insert(p.name.value.clone(), Sym::KernelParam(offset as u32));
        }
        l.scopes.push(root);
        l.frames.push(FrameCtx {
            prefix: String::new(),
            ret_label: None,
            func_name: f.name.value.clone(),
        });
        let body = f.body.as_ref().expect("functions with a body only");
        l.declare_labels(body);
        l.block(body);
        l.frames.pop();
        l.scopes.pop();

        // A label after the last instruction (or a fall-off end) needs a landing place:
        // running off the end of a kernel returns.
        let end = l.insts.len() as u32;
        if l.insts.is_empty()
            || l.label_pos.contains(&Some(end))
            || !matches!(
                l.insts.last().map(|i| (i.op, i.guard)),
                Some((Op::Exit, None))
            )
        {
            l.insts.push(Inst::new(Op::Exit, f.span));
        }
        for &(at, label) in &l.fixups {
            match l.label_pos[label as usize] {
                Some(pos) => {
                    if let Op::Bra { target, .. } = &mut l.insts[at].op {
                        *target = InstId(pos);
                    }
                }
                None => {
                    let (name, span) = l.label_names[label as usize].clone();
                    l.errors.push(LowerError::UnknownLabel { name, span });
                }
            }
        }
        // A use of a register whose too-large declaration was already reported is not an
        // error of its own (one report, not one per use).
        let rejected = std::mem::take(&mut l.rejected_ranges);
        l.errors.retain(|e| match e {
            LowerError::UnknownIdentifier { name, .. } => !rejected.iter().any(|(base, count)| {
                name == base
                    || name
                        .strip_prefix(base.as_str())
                        .and_then(|k| k.parse::<u64>().ok())
                        .is_some_and(|k| k < *count)
            }),
            _ => true,
        });
        if !l.errors.is_empty() {
            return Err(l.errors);
        }
        let insts = IdVec::from_vec(l.insts);
        let cfg = Cfg::build(&insts);
        let mut launch_bounds = LaunchBounds::default();
        for p in &f.performance {
            let dims = |v: &[u32]| {
                let mut d = [1u32; 3];
                for (i, x) in v.iter().take(3).enumerate() {
                    d[i] = *x;
                }
                d
            };
            match &p.value {
                ast::Performance::MaxNtid(v) => launch_bounds.max_ntid = Some(dims(v)),
                ast::Performance::ReqNtid(v) => launch_bounds.req_ntid = Some(dims(v)),
                ast::Performance::MinNctaPerSm(n) => launch_bounds.min_ctas_per_sm = Some(*n),
                _ => {}
            }
        }
        Ok(Kernel {
            name: l.kernel_name,
            params,
            param_size: param_size as u32,
            regs: l.regs,
            insts,
            static_smem: l.static_smem,
            uses_dynamic_smem: l.uses_dynamic_smem,
            local_size: align_up(l.local_size as u64, 8) as u32,
            warp_smem: 0,
            launch_bounds,
            cfg,
            span: f.span,
        })
    }

    /// Lays out the static shared variables the kernel can reach, then dynamic shared memory.
    fn layout_shared(&mut self, f: &ast::Function) {
        let mut used = HashSet::new();
        let mut body_shared: Vec<(String, &ast::VarDecl)> = Vec::new();
        let mut visited = HashSet::new();
        collect_uses(f, self.ctx, &mut used, &mut body_shared, &mut visited);
        let mut offset = 0u64;
        let mut too_large = None;
        let mut place = |key: String, v: &ast::VarDecl, offsets: &mut HashMap<String, u32>| {
            offset = align_up(offset, var_align(v) as u64);
            let end = offset.saturating_add(var_size(v));
            if end > MAX_STATIC_SHARED_BYTES {
                too_large.get_or_insert((end, v.span));
                return;
            }
            offsets.insert(key, offset as u32);
            offset = end;
        };
        for v in self.ctx.shared_decls {
            let is_extern = v.array_dims.iter().any(|d| d.is_none());
            if used.contains(v.name.value.as_str()) {
                if is_extern {
                    self.uses_dynamic_smem = true;
                } else {
                    place(v.name.value.clone(), v, &mut self.shared_offsets);
                }
            }
        }
        for (key, v) in body_shared {
            let is_extern = v.array_dims.iter().any(|d| d.is_none());
            if !is_extern && !self.shared_offsets.contains_key(&key) {
                place(key, v, &mut self.shared_offsets);
            }
        }
        if let Some((size, span)) = too_large {
            self.errors.push(LowerError::TooLarge {
                what: "bytes of static shared memory",
                size,
                limit: MAX_STATIC_SHARED_BYTES,
                span,
            });
        }
        self.static_smem = offset as u32;
        self.dynamic_smem_base = align_up(offset, 16) as u32;
    }

    fn declare_labels(&mut self, block: &'a ast::Block) {
        for s in &block.statements {
            match s {
                Statement::Label(name) => {
                    let id = self.label_pos.len() as u32;
                    self.label_pos.push(None);
                    self.label_names.push((name.value.clone(), name.span));
                    self.declare(&name.value, Sym::Label(id), name.span);
                }
                Statement::Targets(t) => {
                    let id = self.target_lists.len() as u32;
                    self.target_lists.push(t);
                    self.declare(&t.name.value, Sym::Targets(id), t.name.span);
                }
                Statement::CallPrototype(p) => {
                    let id = self.prototypes.len() as u32;
                    self.prototypes.push(p);
                    self.declare(&p.name.value, Sym::Prototype(id), p.name.span);
                }
                Statement::Block(b) => self.declare_labels(b),
                _ => {}
            }
        }
    }

    fn new_label(&mut self, name: &str, span: Span) -> u32 {
        let id = self.label_pos.len() as u32;
        self.label_pos.push(None);
        self.label_names.push((name.to_string(), span));
        id
    }

    fn place_label(&mut self, id: u32) {
        self.label_pos[id as usize] = Some(self.insts.len() as u32);
    }

    fn declare(&mut self, name: &str, sym: Sym, span: Span) {
        let scope = self.scopes.last_mut().expect("inside a scope");
        if scope.names.insert(name.to_string(), sym).is_some() {
            self.errors.push(LowerError::Redeclared {
                name: name.to_string(),
                span,
            });
        }
    }

    fn lookup(&self, name: &str) -> Option<Sym> {
        for scope in self.scopes.iter().rev() {
            if let Some(s) = scope.names.get(name) {
                return Some(*s);
            }
            if scope.function_root {
                break;
            }
        }
        match self.ctx.syms.get(name)? {
            ModuleSym::Global(id) => Some(Sym::Global(*id)),
            ModuleSym::Function(addr) => Some(Sym::Function(*addr)),
            ModuleSym::Shared => self
                .shared_offsets
                .get(name)
                .map(|&o| Sym::Shared(o))
                .or(Some(Sym::Shared(self.dynamic_smem_base))),
        }
    }

    fn alloc_local(&mut self, size: u64, align: u32, span: Span) -> u32 {
        let off = align_up(self.local_size as u64, align as u64);
        let end = off.saturating_add(size);
        if end > MAX_LOCAL_BYTES {
            self.errors.push(LowerError::TooLarge {
                what: "bytes of local memory per thread",
                size: end,
                limit: MAX_LOCAL_BYTES,
                span,
            });
            return 0;
        }
        self.local_size = end as u32;
        off as u32
    }

    fn block(&mut self, block: &'a ast::Block) {
        for s in &block.statements {
            match s {
                Statement::Reg(d) => self.reg_decl(d),
                Statement::Var(v) => self.var_decl(v),
                Statement::Label(name) => {
                    if let Some(Sym::Label(id)) = self.lookup(&name.value) {
                        self.place_label(id);
                    }
                }
                Statement::Instruction(i) => {
                    if let Err(e) = self.instruction(i) {
                        self.errors.push(e);
                    }
                }
                Statement::Block(b) => {
                    self.scopes.push(Scope {
                        names: HashMap::new(),
                        function_root: false,
                    });
                    self.block(b);
                    self.scopes.pop();
                }
                Statement::Pragma(_) | Statement::Targets(_) | Statement::CallPrototype(_) => {}
            }
        }
    }

    fn reg_decl(&mut self, d: &ast::RegDecl) {
        if d.vector != 1 {
            self.errors.push(LowerError::UnsupportedDeclaration {
                what: "vector registers (`.reg .v2`/`.v4`)".into(),
                span: d.span,
            });
            return;
        }
        let prefix = self
            .frames
            .last()
            .map(|f| f.prefix.clone())
            .unwrap_or_default();
        let declared: u64 = d.names.iter().map(|n| n.range.map_or(1, u64::from)).sum();
        if self.regs.len() as u64 + declared > MAX_DECLARED_REGISTERS {
            self.errors.push(LowerError::TooLarge {
                what: "declared registers",
                size: self.regs.len() as u64 + declared,
                limit: MAX_DECLARED_REGISTERS,
                span: d.span,
            });
            for n in &d.names {
                let count = n.range.map_or(0, u64::from);
                self.rejected_ranges.push((n.name.value.clone(), count));
            }
            return;
        }
        for n in &d.names {
            match n.range {
                None => self.new_reg(&prefix, &n.name.value, d.ty, n.name.span),
                Some(count) => {
                    for i in 0..count {
                        let name = format!("{}{}", n.name.value, i);
                        self.new_reg(&prefix, &name, d.ty, n.name.span);
                    }
                }
            }
        }
    }

    fn new_reg(&mut self, prefix: &str, name: &str, ty: Ty, span: Span) {
        let r = self.regs.push(RegInfo {
            name: format!("{prefix}{name}"),
            ty,
        });
        self.declare(name, Sym::Reg(r), span);
    }

    fn var_decl(&mut self, v: &ast::VarDecl) {
        match v.space {
            StateSpace::Local | StateSpace::Param => {
                let off = self.alloc_local(var_size(v), var_align(v), v.span);
                let sym = if v.space == StateSpace::Param {
                    Sym::ParamVar(off)
                } else {
                    Sym::Local(off)
                };
                self.declare(&v.name.value, sym, v.name.span);
            }
            StateSpace::Shared => {
                let is_extern = v.array_dims.iter().any(|d| d.is_none());
                let sym = if is_extern {
                    self.uses_dynamic_smem = true;
                    Sym::Shared(self.dynamic_smem_base)
                } else {
                    let func = &self.frames.last().expect("in a function").func_name;
                    let key = format!("{func}::{}", v.name.value);
                    Sym::Shared(self.shared_offsets.get(&key).copied().unwrap_or(0))
                };
                self.declare(&v.name.value, sym, v.name.span);
            }
            _ => self.errors.push(LowerError::UnsupportedDeclaration {
                what: format!("`.{:?}` variable inside a function body", v.space).to_lowercase(),
                span: v.span,
            }),
        }
    }

    fn push(&mut self, inst: Inst) {
        self.insts.push(inst);
    }

    /// Inlines `call (rets), func, (args)`, or lowers an indirect
    /// `call (rets), fptr, (args), flist|fproto` ([`indirect`]).
    fn call(&mut self, i: &'a ast::Instruction) -> Result<(), LowerError> {
        use ast::OperandKind as K;
        let mut ops = i.operands.iter();
        let mut rets: &'a [ast::Operand] = &[];
        let mut first = ops.next();
        if let Some(ast::Operand {
            kind: K::List(l), ..
        }) = first
        {
            rets = l;
            first = ops.next();
        }
        let Some(target) = first else {
            return Err(LowerError::BadOperand {
                inst: "call".into(),
                expected: "a function name or a register holding a function's address",
                span: i.span,
            });
        };
        let mut args: &'a [ast::Operand] = &[];
        let mut next = ops.next();
        if let Some(ast::Operand {
            kind: K::List(l), ..
        }) = next
        {
            args = l;
            next = ops.next();
        }
        if let Some(o) = ops.next() {
            return Err(LowerError::BadOperand {
                inst: "call".into(),
                expected: "nothing after the call's target list or prototype",
                span: o.span,
            });
        }
        if i.guard.is_some() {
            return Err(LowerError::BadOperand {
                inst: "call".into(),
                expected: "no guard predicate (predicated calls are not supported)",
                span: i.span,
            });
        }
        match (&target.kind, next) {
            (_, Some(table)) => self.indirect_call(i, target, rets, args, table),
            (K::Ident { name, .. }, None) if matches!(self.lookup(name), Some(Sym::Reg(_))) => {
                Err(LowerError::BadOperand {
                    inst: "call".into(),
                    expected: "a `.calltargets` list or `.callprototype` after the arguments of an indirect call",
                    span: i.span,
                })
            }
            (K::Ident { name, .. }, None) => {
                if !self.inline_calls {
                    // Checking a function on its own: the arguments must fit; the callee is
                    // checked on its own.
                    self.direct_callee(name, target.span)?;
                    return self.check_call_operands(i, name, rets, args);
                }
                self.inline_call(name, target.span, rets, args, i.span)
            }
            (_, None) => Err(LowerError::BadOperand {
                inst: "call".into(),
                expected: "a function name, or a function's address followed by its arguments and a `.calltargets` list or `.callprototype`",
                span: target.span,
            }),
        }
    }

    /// The function a direct call names, which must have a body.
    fn direct_callee(&self, name: &str, span: Span) -> Result<&'a ast::Function, LowerError> {
        match self.ctx.functions.get(name) {
            Some(f) if f.body.is_some() => Ok(*f),
            _ => Err(LowerError::UnknownFunction {
                name: name.to_string(),
                span,
            }),
        }
    }

    /// Inlines the body of `name` with these results and arguments.
    fn inline_call(
        &mut self,
        name: &str,
        name_span: Span,
        rets: &'a [ast::Operand],
        args: &'a [ast::Operand],
        span: Span,
    ) -> Result<(), LowerError> {
        use ast::OperandKind as K;
        let callee = self.direct_callee(name, name_span)?;
        if self.frames.iter().any(|f| f.func_name == *name) {
            return Err(LowerError::Recursion {
                name: name.to_string(),
                span: name_span,
            });
        }
        if callee.returns.len() != rets.len() || callee.params.len() != args.len() {
            return Err(LowerError::OperandCount {
                inst: format!("call {name}"),
                expected: format!(
                    "{} results and {} arguments",
                    callee.returns.len(),
                    callee.params.len()
                ),
                found: rets.len() + args.len(),
                span,
            });
        }
        // Bind the callee's parameters in a fresh root scope.
        let mut root = Scope {
            names: HashMap::new(),
            function_root: true,
        };
        let mut moves = Vec::new();
        self.inline_count += 1;
        let prefix = format!("{name}#{}::", self.inline_count);
        for (decl, actual) in callee
            .returns
            .iter()
            .chain(&callee.params)
            .zip(rets.iter().chain(args))
        {
            let sym = match &actual.kind {
                K::Ident { name: a, .. } => self.lookup(a),
                _ => None,
            };
            match (decl.space, sym) {
                (StateSpace::Param, Some(Sym::ParamVar(off))) => {
                    root.names.insert(decl.name.value.clone(), Sym::ParamVar(off));
                }
                (StateSpace::Reg, Some(Sym::Reg(r))) => {
                    let nr = self.regs.push(RegInfo {
                        name: format!("{prefix}{}", decl.name.value),
                        ty: decl.ty,
                    });
                    root.names.insert(decl.name.value.clone(), Sym::Reg(nr));
                    moves.push((nr, r, decl.ty));
                }
                _ => {
                    return Err(LowerError::BadOperand {
                        inst: "call".into(),
                        expected: "`.param` variables for `.param` parameters, registers for `.reg` parameters",
                        span: actual.span,
                    })
                }
            }
        }
        // `.reg` parameters are copied in (results in `.reg` are not supported: NVRTC passes
        // everything through `.param`).
        for (decl, _) in callee.returns.iter().zip(rets) {
            if decl.space == StateSpace::Reg {
                return Err(LowerError::BadOperand {
                    inst: "call".into(),
                    expected: "`.param` return values",
                    span: decl.span,
                });
            }
        }
        for (dst, src, ty) in moves {
            let mut m = Inst::new(Op::Mov(ty), span);
            m.dsts[0] = Some(dst);
            m.n_dsts = 1;
            m.srcs[0] = crate::inst::Operand::Reg(src);
            m.n_srcs = 1;
            self.push(m);
        }
        let ret_label = self.new_label(&format!("{name}.return"), span);
        self.scopes.push(root);
        self.frames.push(FrameCtx {
            prefix,
            ret_label: Some(ret_label),
            func_name: name.to_string(),
        });
        let body = callee.body.as_ref().expect("checked above");
        self.declare_labels(body);
        self.block(body);
        self.frames.pop();
        self.scopes.pop();
        self.place_label(ret_label);
        Ok(())
    }
}

/// Collects every identifier a function (and, transitively, its callees) mentions, and the
/// static `.shared` variables declared in their bodies (keyed `func::var`). An indirect
/// call may reach every function whose address the module takes.
fn collect_uses<'a>(
    f: &'a ast::Function,
    ctx: &ModuleCtx<'a>,
    used: &mut HashSet<String>,
    body_shared: &mut Vec<(String, &'a ast::VarDecl)>,
    visited: &mut HashSet<String>,
) {
    if !visited.insert(f.name.value.clone()) {
        return;
    }
    fn walk<'a>(
        func: &str,
        b: &'a ast::Block,
        used: &mut HashSet<String>,
        calls: &mut Vec<String>,
        body_shared: &mut Vec<(String, &'a ast::VarDecl)>,
    ) {
        for s in &b.statements {
            match s {
                Statement::Instruction(i) => {
                    for o in &i.operands {
                        operand_names(o, used);
                    }
                    if i.opcode.value == "call" {
                        for o in &i.operands {
                            if let ast::OperandKind::Ident { name, .. } = &o.kind {
                                calls.push(name.clone());
                            }
                        }
                        // An indirect call names a register and a target list or
                        // prototype; a direct call names only its callee.
                        let names = i
                            .operands
                            .iter()
                            .filter(|o| matches!(o.kind, ast::OperandKind::Ident { .. }))
                            .count();
                        if names > 1 {
                            calls.push(INDIRECT.to_string());
                        }
                    }
                }
                Statement::Block(inner) => walk(func, inner, used, calls, body_shared),
                Statement::Var(v) if v.space == StateSpace::Shared => {
                    body_shared.push((format!("{func}::{}", v.name.value), v));
                }
                _ => {}
            }
        }
    }
    fn operand_names(o: &ast::Operand, used: &mut HashSet<String>) {
        match &o.kind {
            ast::OperandKind::Ident { name, .. } => {
                used.insert(name.clone());
            }
            ast::OperandKind::Address { base: Some(b), .. } => {
                used.insert(b.name.clone());
            }
            ast::OperandKind::Vector(v) | ast::OperandKind::List(v) => {
                for x in v {
                    operand_names(x, used);
                }
            }
            ast::OperandKind::Not(x) => operand_names(x, used),
            _ => {}
        }
    }
    let mut calls = Vec::new();
    if let Some(body) = &f.body {
        walk(&f.name.value, body, used, &mut calls, body_shared);
    }
    /// Stands for "every function whose address is taken" in `calls`.
    const INDIRECT: &str = "(indirect)";
    for c in calls {
        let callees: Vec<&str> = if c == INDIRECT {
            ctx.address_taken.to_vec()
        } else {
            vec![c.as_str()]
        };
        for name in callees {
            if let Some(callee) = ctx.functions.get(name) {
                collect_uses(callee, ctx, used, body_shared, visited);
            }
        }
    }
}
