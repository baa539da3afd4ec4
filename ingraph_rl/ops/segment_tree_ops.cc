// Segment-tree kernels for prioritized replay (CPU).
//
// A tree over P leaves (P a power of two) is a flat float32 array of 2*P:
// root at 1, leaf i at P + i, children of n at 2n and 2n + 1, index 0 unused.
// The Python side (ingraph_rl/components/memories/segment_tree.py) documents
// the semantics and holds the pure-TF implementation these ops must match
// bit for bit (same float32 operations in the same order).
//
//   SegmentTreeUpdate(tree: resource, indices, values, op)
//       Writes the leaves (for a repeated index the LAST occurrence wins) and
//       recomputes the ancestors of the touched leaves only, level by level,
//       IN PLACE in the variable's buffer under its exclusive lock: O(B log P)
//       work. The buffer is copied only when another tensor still aliases it
//       (a live read of the variable), as TF's own dense updates do.
//   SegmentTreeFindPrefixsumIdx(tree: float, masses) -> indices: int32
//   ResourceSegmentTreeFindPrefixsumIdx(tree: resource, masses) -> int32
//       One descent per mass: mass < left sum goes left, otherwise subtract
//       and go right (but never into a right subtree of sum 0). The resource
//       version reads the variable under its shared lock, never copying it.
//
// Built by setup.py (g++ with tf.sysconfig's flags) and by Bazel (BUILD).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tensorflow {
namespace {

using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

REGISTER_OP("SegmentTreeFindPrefixsumIdx")
    .Input("tree: float")
    .Input("masses: float")
    .Output("indices: int32")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle tree;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &tree));
      c->set_output(0, c->input(1));
      return absl::OkStatus();
    })
    .Doc(R"doc(
For each mass, the leaf of the sum tree whose prefix-sum segment holds it.
tree: a flat sum tree of length 2 * P, P a power of two.
masses: values in [0, tree[1]).
indices: leaf indices in [0, P), shape of masses.
)doc");

REGISTER_OP("ResourceSegmentTreeFindPrefixsumIdx")
    .Input("tree: resource")
    .Input("masses: float")
    .Output("indices: int32")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->input(1));
      return absl::OkStatus();
    })
    .Doc(R"doc(
SegmentTreeFindPrefixsumIdx on a float32 resource variable, read under its
shared lock without copying it.
)doc");

REGISTER_OP("SegmentTreeUpdate")
    .Input("tree: resource")
    .Input("indices: Tindices")
    .Input("values: float")
    .Attr("Tindices: {int32, int64}")
    .Attr("op: {'sum', 'min'}")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle indices, values, merged;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &indices));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &values));
      TF_RETURN_IF_ERROR(c->Merge(indices, values, &merged));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Sets leaves of a float32 segment-tree variable in place and recomputes their
ancestors. A repeated index takes the value of its last occurrence.
tree: the variable, a flat array of length 2 * P, P a power of two.
indices: leaf indices in [0, P).
values: one value per index.
op: "sum" or "min": what each parent is of its two children.
)doc");

// P of a tree tensor, or an error naming the op.
absl::Status NumLeaves(const Tensor& tree, const char* op, int64_t* leaves) {
  if (tree.dtype() != DT_FLOAT) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": the tree must be float32, got ", DataTypeString(tree.dtype())));
  }
  const int64_t n = tree.NumElements();
  if (tree.dims() != 1 || n < 2 || (n & (n - 1)) != 0 ||
      n / 2 > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": the tree must be 1-D of length 2 * P, P a power of two <= "
        "2**30; got shape ", tree.shape().DebugString()));
  }
  *leaves = n / 2;
  return absl::OkStatus();
}

void Find(const float* tree, int64_t leaves, const Tensor& masses_t,
          Tensor* out_t) {
  const auto masses = masses_t.flat<float>();
  auto out = out_t->flat<int32_t>();
  const int64_t n = masses.size();
  // Level-major: all masses take one step before any takes the next, so the
  // loads of one level are independent and their cache misses overlap (a
  // mass-major loop waits on one miss per level per mass on large trees).
  std::vector<float> mass(masses.data(), masses.data() + n);
  std::vector<int64_t> node(n, 1);
  for (int64_t width = leaves; width > 1; width >>= 1) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t left = 2 * node[i];
      const float left_sum = tree[left];
      if (mass[i] >= left_sum && tree[left + 1] > 0.0f) {
        mass[i] -= left_sum;
        node[i] = left + 1;
      } else {
        node[i] = left;
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    out(i) = static_cast<int32_t>(node[i] - leaves);
  }
}

class SegmentTreeFindPrefixsumIdxOp : public OpKernel {
 public:
  explicit SegmentTreeFindPrefixsumIdxOp(OpKernelConstruction* c)
      : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& tree = ctx->input(0);
    const Tensor& masses = ctx->input(1);
    int64_t leaves;
    OP_REQUIRES_OK(ctx, NumLeaves(tree, "SegmentTreeFindPrefixsumIdx",
                                  &leaves));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, masses.shape(), &out));
    Find(tree.flat<float>().data(), leaves, masses, out);
  }
};

class ResourceSegmentTreeFindPrefixsumIdxOp : public OpKernel {
 public:
  explicit ResourceSegmentTreeFindPrefixsumIdxOp(OpKernelConstruction* c)
      : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    core::RefCountPtr<Var> var;
    OP_REQUIRES_OK(ctx, LookupResource(ctx, HandleFromInput(ctx, 0), &var));
    const Tensor& masses = ctx->input(1);
    // Like ResourceGather: hold the shared lock for the whole read instead
    // of taking a reference to the buffer, so that neither this op nor a
    // later update has to copy the tree.
    tf_shared_lock lock(*var->mu());
    OP_REQUIRES(ctx, var->is_initialized,
                absl::FailedPreconditionError(
                    "ResourceSegmentTreeFindPrefixsumIdx: the tree variable "
                    "is not initialized"));
    const Tensor& tree = *var->tensor();
    int64_t leaves;
    OP_REQUIRES_OK(ctx, NumLeaves(tree, "ResourceSegmentTreeFindPrefixsumIdx",
                                  &leaves));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, masses.shape(), &out));
    Find(tree.flat<float>().data(), leaves, masses, out);
  }
};

template <typename Index>
class SegmentTreeUpdateOp : public OpKernel {
 public:
  explicit SegmentTreeUpdateOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string op;
    OP_REQUIRES_OK(c, c->GetAttr("op", &op));
    is_min_ = op == "min";
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& indices_t = ctx->input(1);
    const Tensor& values_t = ctx->input(2);
    OP_REQUIRES(ctx,
                TensorShapeUtils::IsVector(indices_t.shape()) &&
                    indices_t.shape() == values_t.shape(),
                absl::InvalidArgumentError(absl::StrCat(
                    "SegmentTreeUpdate: indices and values must be vectors of "
                    "one length; got ",
                    indices_t.shape().DebugString(), " and ",
                    values_t.shape().DebugString())));
    const auto indices = indices_t.flat<Index>();
    const auto values = values_t.flat<float>();
    const int64_t batch = indices.size();

    core::RefCountPtr<Var> var;
    OP_REQUIRES_OK(ctx, LookupResource(ctx, HandleFromInput(ctx, 0), &var));
    mutex_lock lock(*var->mu());
    OP_REQUIRES(ctx, var->is_initialized,
                absl::FailedPreconditionError(
                    "SegmentTreeUpdate: the tree variable is not initialized"));
    Tensor* tree_t = var->tensor();
    int64_t leaves;
    OP_REQUIRES_OK(ctx, NumLeaves(*tree_t, "SegmentTreeUpdate", &leaves));
    // Check every index before changing anything.
    for (int64_t i = 0; i < batch; ++i) {
      const int64_t index = static_cast<int64_t>(indices(i));
      OP_REQUIRES(ctx, index >= 0 && index < leaves,
                  absl::InvalidArgumentError(absl::StrCat(
                      "SegmentTreeUpdate: indices[", i, "] = ", index,
                      " is not in [0, ", leaves, ")")));
    }
    if (batch == 0) return;
    // Exclusive buffer: copy only while a read of the variable still aliases
    // it (never in copy-on-read mode, where reads copy and the refcount is 1).
    if (!tree_t->RefCountIsOne()) {
      Tensor copy;
      AllocatorAttributes attr;
      attr.set_gpu_compatible(true);
      attr.set_nic_compatible(true);
      OP_REQUIRES_OK(ctx, ctx->allocate_temp(DT_FLOAT, tree_t->shape(), &copy,
                                             attr));
      const float* src = tree_t->flat<float>().data();
      std::copy(src, src + tree_t->NumElements(), copy.flat<float>().data());
      *tree_t = copy;
    }
    float* tree = tree_t->flat<float>().data();

    // Leaves in batch order: the last occurrence of an index wins.
    std::vector<int64_t> nodes(batch);
    for (int64_t i = 0; i < batch; ++i) {
      nodes[i] = leaves + static_cast<int64_t>(indices(i));
      tree[nodes[i]] = values(i);
    }
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    // All nodes sit on one level; halving keeps them sorted.
    for (int64_t width = leaves; width > 1; width >>= 1) {
      for (int64_t& node : nodes) node >>= 1;
      nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
      if (is_min_) {
        for (const int64_t node : nodes) {
          tree[node] = std::min(tree[2 * node], tree[2 * node + 1]);
        }
      } else {
        for (const int64_t node : nodes) {
          tree[node] = tree[2 * node] + tree[2 * node + 1];
        }
      }
    }
  }

 private:
  bool is_min_ = false;
};

REGISTER_KERNEL_BUILDER(
    Name("SegmentTreeFindPrefixsumIdx").Device(DEVICE_CPU),
    SegmentTreeFindPrefixsumIdxOp);
REGISTER_KERNEL_BUILDER(
    Name("ResourceSegmentTreeFindPrefixsumIdx").Device(DEVICE_CPU),
    ResourceSegmentTreeFindPrefixsumIdxOp);
REGISTER_KERNEL_BUILDER(Name("SegmentTreeUpdate")
                            .Device(DEVICE_CPU)
                            .TypeConstraint<int32_t>("Tindices"),
                        SegmentTreeUpdateOp<int32_t>);
REGISTER_KERNEL_BUILDER(Name("SegmentTreeUpdate")
                            .Device(DEVICE_CPU)
                            .TypeConstraint<int64_t>("Tindices"),
                        SegmentTreeUpdateOp<int64_t>);

}  // namespace
}  // namespace tensorflow
