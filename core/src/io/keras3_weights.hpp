// Keras 3's weights layout: what model.save_weights("x.weights.h5") writes, and a .keras
// archive's model.weights.h5 (Keras' saving_lib). Each object that owns variables has a group
// holding them as datasets vars/0, vars/1, ... (in the order the object made them, trainable
// ones first); a model's layers are under /layers, each group named after the layer's class and
// its place among the model's layers of that class (layers/dense, layers/dense_1, ...), not the
// layer's name; a layer's sublayers are groups named after its attributes
// (layers/multi_head_attention/query_dense/vars/0). The optimizer's variables are in
// /optimizer/vars, the model's own in /vars. Keras 3.0-3.6 write an empty vars group for every
// object, later versions none.
//
// Plain functions; use only while holding hdf5_mutex() (io/hdf5_lock.hpp).
#pragma once

#include <hdf5.h>

#include <vector>

#include "io/hdf5_access.hpp"
#include "tandem/checkpoint_file.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// Whether the file whose root group is `root` is laid out as Keras 3's (a /layers group).
bool has_keras3_weights_layout(hid_t root);

/// The layers' weights: one LayerWeights per group under /layers, named as that group ("dense_1",
/// in name order), its weights named by their path below it without "vars" ("0", "1", ...;
/// "query_dense/0" for a sublayer's), each group's in numeric order, sublayers after its own.
/// The optimizer's variables are not read (training starts its optimizer afresh). Throws
/// std::runtime_error naming the place in the file when the model holds variables of its own
/// (/vars not empty), when a vars group holds anything but datasets numbered 0, 1, ... without
/// a gap, or a layer group a dataset outside vars; and as hdf5::read_tensor does, charging
/// `budget`.
std::vector<LayerWeights> read_keras3_layers(hid_t root, hdf5::WeightBudget& budget);

}  // namespace tandem

TANDEM_INTERNAL_API_END
