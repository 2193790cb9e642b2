// Keras' GroupNormalization (Wu & He, 2018) over the last axis: each sample's channels split
// into `groups` groups of consecutive channels, each group normalised with the mean and biased
// variance of its values at every position (all the axes but the channels), then the
// per-channel gamma and beta: y = (x - mean_g) / sqrt(var_g + epsilon) * gamma + beta. groups
// -1 is one per channel (instance normalization); groups 1 normalises the whole sample. No
// moving statistics: training and inference compute the same, and replicas need no
// cross-replica sums.
//
// How it computes, on its backend: the sample seen as (positions, groups, channels per group),
// its middle axes swapped so each group's values are one row (swap_middle_axes), the rows
// normalised (layer_norm_forward, no affine), swapped back, then gamma and beta per channel
// (column_affine); the backward the same way in reverse. Weights, in Keras order: gamma (if
// scale), beta (if center). Ownership and threads: as every layer's (tandem/layer.hpp).
#pragma once

#include "backend/ops.hpp"
#include "nn/normalization_affine.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct GroupNormalizationOptions : AffineNormalizationOptions {
  std::int64_t groups = 32;  // -1: one per channel
};

class GroupNormalization : public Layer {
 public:
  GroupNormalization(std::string name, GroupNormalizationOptions options);
  std::string class_name() const override { return "GroupNormalization"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;
  /// After build: the groups, positions per sample and channels per group.
  std::int64_t groups() const { return groups_; }
  std::int64_t positions() const { return positions_; }
  std::int64_t group_channels() const { return group_channels_; }

 private:
  std::string who() const { return "layer '" + name() + "' (GroupNormalization)"; }
  /// (rows, positions, groups, group channels) with its middle axes swapped, or back (`back`).
  void swap_groups(const Tensor& from, bool back, Tensor& to);

  GroupNormalizationOptions options_;
  Shape input_shape_;
  std::int64_t groups_ = 0, positions_ = 0, group_channels_ = 0, channels_ = 0, rows_ = 0;
  Parameter gamma_, beta_;
  Tensor ones_;                          // gamma's stand-in without scale
  Tensor grouped_, normalized_, stats_;  // the last forward's, for the backward
  Tensor output_, scratch_, grouped_grad_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
