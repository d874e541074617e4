//! Execution of `tex` and `tld4` on texture objects (see [`crate::texture`]).

use crate::memory::GlobalAccess;
use kir::inst::{Space, TexGeom, Ty};

use super::{lanes, Exec};
use crate::error::{ExecError, FaultReason};
use crate::texture::{self, Channel, Footprint, TextureDesc};

impl<M: GlobalAccess + ?Sized> Exec<'_, '_, '_, M> {
    pub(super) fn tex(
        &mut self,
        exec: u32,
        geom: TexGeom,
        dty: Ty,
        cty: Ty,
        gather: Option<u8>,
    ) -> Result<(), ExecError> {
        let s = self.inst.srcs;
        for l in lanes(exec) {
            let handle = self.read(s[0], l);
            let Some(t) = self.mem.device().texture(handle).cloned() else {
                return Err(self.texture_error(l, format!("{handle:#x} is not a texture object")));
            };
            if t.returns_float() != (dty == Ty::F32) {
                return Err(self.texture_error(
                    l,
                    format!(
                        "texture object {handle} returns {} but the instruction reads .{}",
                        if t.returns_float() {
                            "floats"
                        } else {
                            "integers"
                        },
                        format!("{dty:?}").to_lowercase()
                    ),
                ));
            }
            let fp = texture::fetch_footprint(&t, geom, cty, gather, |k| self.read(s[k], l));
            let out: [u32; 4] = match gather {
                // The component of each of the four texels.
                Some(comp) => {
                    let mut out = [0u32; 4];
                    for (k, o) in out.iter_mut().enumerate() {
                        *o = self.texel(l, &t, fp.taps[k].0, usize::from(comp))?.bits();
                    }
                    out
                }
                None => self.filter(l, &t, &fp)?,
            };
            for (k, v) in out.into_iter().enumerate() {
                self.write(k, l, u64::from(v));
            }
        }
        Ok(())
    }

    /// The four channels a footprint filters to (one tap: the texel as read).
    fn filter(&self, l: usize, t: &TextureDesc, fp: &Footprint) -> Result<[u32; 4], ExecError> {
        let mut out = [0u32; 4];
        for (c, o) in out.iter_mut().enumerate() {
            if fp.n == 1 {
                *o = self.texel(l, t, fp.taps[0].0, c)?.bits();
                continue;
            }
            // Linear filtering (float results only, checked with the descriptor): the
            // weighted sum in tap order.
            let mut sum = 0.0f32;
            for &(addr, w) in &fp.taps[..fp.n] {
                if let Channel::Float(v) = self.texel(l, t, addr, c)? {
                    sum += w * v;
                }
            }
            *o = sum.to_bits();
        }
        Ok(out)
    }

    /// Channel `c` of the texel at `addr` (a border texel, `None`, reads zero).
    fn texel(
        &self,
        l: usize,
        t: &TextureDesc,
        addr: Option<u64>,
        c: usize,
    ) -> Result<Channel, ExecError> {
        let Some(a) = addr else {
            return Ok(if t.returns_float() {
                Channel::Float(0.0)
            } else {
                Channel::Int(0)
            });
        };
        let n = t.texel_bytes();
        let bytes = self
            .mem
            .device()
            .read_bytes(a, n)
            .map_err(|f| self.fault(l, Space::Global, a, n as u32, FaultReason::Global(f)))?;
        Ok(texture::channel(t, bytes, c))
    }

    fn texture_error(&self, lane: usize, what: String) -> ExecError {
        ExecError::Texture {
            at: self.thread_at(lane),
            what,
        }
    }
}
