//! Walks a module's float parameters by dotted path (`blocks.0.attn.wq`), for gradient
//! probes, weight-decay groups and weight export.

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

/// One float parameter: its path, id and value flattened to `[n]`.
pub struct NamedParam {
    pub path: String,
    pub id: ParamId,
    pub shape: Vec<usize>,
    pub value: Tensor<1>,
}

struct Collect<'a> {
    path: Vec<String>,
    out: Vec<NamedParam>,
    /// When set, collect gradients instead of values.
    grads: Option<&'a GradientsParams>,
}

impl ModuleVisitor for Collect<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = match self.grads {
            Some(grads) => match grads.get::<D>(param.id) {
                Some(g) => g,
                None => return,
            },
            None => param.val(),
        };
        let shape = value.dims().to_vec();
        let n: usize = shape.iter().product();
        self.out.push(NamedParam {
            path: self.path.join("."),
            id: param.id,
            shape,
            value: value.reshape([n]),
        });
    }
}

/// Every float parameter of `module`, in visiting order.
pub fn named_params<M: Module>(module: &M) -> Vec<NamedParam> {
    let mut v = Collect {
        path: Vec::new(),
        out: Vec::new(),
        grads: None,
    };
    module.visit(&mut v);
    v.out
}

/// The gradient of every float parameter that has one, by path.
pub fn named_grads<M: Module>(module: &M, grads: &GradientsParams) -> Vec<NamedParam> {
    let mut v = Collect {
        path: Vec::new(),
        out: Vec::new(),
        grads: Some(grads),
    };
    module.visit(&mut v);
    v.out
}
