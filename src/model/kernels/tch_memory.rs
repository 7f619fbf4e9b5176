//! Raw access to libtorch's CPU memory for the row kernels: f32 slices of contiguous tensors
//! and of stacks of sources, and fresh output tensors to write into.

/// Whether the row kernels (and libtorch's CPU flash attention) take `t`: f32 on the CPU.
pub fn cpu_f32(t: &tch::Tensor) -> bool {
    t.device() == tch::Device::Cpu && t.kind() == tch::Kind::Float
}

/// A CPU f32 `[K, N, d]` whose `N d` floats of each slot `k` are contiguous, its slots
/// `slot >= N d` floats apart (a stack of sources or their gradients with room between
/// slots): its data from the first element, and `slot`.
pub fn slots_of(t: &tch::Tensor) -> Option<(&[f32], usize)> {
    let (len, slot) = slot_layout(t)?;
    // SAFETY: the view's elements lie within `len` floats of its first one (checked by
    // `slot_layout`), and the tensor outlives the borrow.
    Some((
        unsafe { std::slice::from_raw_parts(t.data_ptr() as *const f32, len) },
        slot,
    ))
}

/// [`slots_of`], mutably.
pub fn slots_of_mut(t: &mut tch::Tensor) -> Option<(&mut [f32], usize)> {
    let (len, slot) = slot_layout(t)?;
    // SAFETY: as in `slots_of`, borrowed mutably.
    Some((
        unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, len) },
        slot,
    ))
}

/// The floats a slotted `[K, N, d]` view spans from its first element, and its slot
/// distance; `None` for any other layout, and for an empty one (no data to point at).
fn slot_layout(t: &tch::Tensor) -> Option<(usize, usize)> {
    let (size, stride) = (t.size(), t.stride());
    let [k, n, d] = size[..] else { return None };
    let (k, n, d) = (k as usize, n as usize, d as usize);
    let rows = n * d;
    if k == 0 || rows == 0 || stride.iter().any(|&s| s < 0) {
        return None;
    }
    let slot = if k > 1 { stride[0] as usize } else { rows };
    let dense = (d == 1 || stride[2] == 1) && (n == 1 || stride[1] as usize == d);
    (cpu_f32(t) && dense && slot >= rows).then_some(((k - 1) * slot + rows, slot))
}

/// A contiguous CPU f32 tensor's data.
pub fn floats(t: &tch::Tensor) -> Option<&[f32]> {
    if !(t.is_contiguous() && cpu_f32(t)) {
        return None;
    }
    // SAFETY: `numel` contiguous floats from the first element; the tensor outlives the
    // borrow.
    Some(unsafe { std::slice::from_raw_parts(t.data_ptr() as *const f32, t.numel()) })
}

pub fn empty(shape: &[i64]) -> tch::Tensor {
    tch::Tensor::empty(shape, (tch::Kind::Float, tch::Device::Cpu))
}

pub fn slice_mut(t: &mut tch::Tensor) -> &mut [f32] {
    let n = t.numel();
    // SAFETY: a fresh contiguous f32 CPU tensor of `n` elements, borrowed mutably.
    unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, n) }
}
