#include "nn/keras_layer_order.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace tandem::nn {

namespace {

// The graph's nodes: the model's inputs (InputLayers' nodes, -1 - i) and the calls (by index),
// each with its layer (an InputLayer as its input's -1 - i) and the nodes it reads.
class Nodes {
 public:
  Nodes(std::size_t input_count, const std::vector<FunctionalCall>& calls)
      : input_count_(input_count), calls_(calls) {}
  std::size_t count() const { return input_count_ + calls_.size(); }
  std::size_t slot(int node) const {
    return node < 0 ? static_cast<std::size_t>(-1 - node)
                    : input_count_ + static_cast<std::size_t>(node);
  }
  int layer(int node) const {
    return node < 0 ? node : static_cast<int>(calls_[static_cast<std::size_t>(node)].layer);
  }
  const std::vector<int>& reads(int node) const {
    static const std::vector<int> none;
    return node < 0 ? none : calls_[static_cast<std::size_t>(node)].inputs;
  }

 private:
  std::size_t input_count_;
  const std::vector<FunctionalCall>& calls_;
};

// Keras' _build_map: depth first from each output, numbering layers where the walk first meets
// them (before their inputs), the nodes listed in post order. Iterative: a model may be a chain
// of thousands of calls.
std::vector<int> walk_from_outputs(const Nodes& nodes, const std::vector<std::size_t>& outputs,
                                   std::map<int, int>& first_met) {
  std::vector<int> post_order;
  std::vector<char> finished(nodes.count(), 0);
  std::vector<std::pair<int, std::size_t>> stack;  // node, next input to visit
  const auto enter = [&](int node) {
    if (finished[nodes.slot(node)]) return;
    first_met.try_emplace(nodes.layer(node), static_cast<int>(first_met.size()));
    stack.emplace_back(node, 0);
  };
  for (std::size_t output : outputs) {
    enter(static_cast<int>(output));
    while (!stack.empty()) {
      const int node = stack.back().first;
      const std::vector<int>& reads = nodes.reads(node);
      if (stack.back().second < reads.size()) {
        enter(reads[stack.back().second++]);
        continue;
      }
      finished[nodes.slot(node)] = 1;
      post_order.push_back(node);
      stack.pop_back();
    }
  }
  return post_order;
}

}  // namespace

std::vector<int> keras_layer_order(std::size_t input_count,
                                   const std::vector<FunctionalCall>& calls,
                                   const std::vector<std::size_t>& outputs) {
  const Nodes nodes(input_count, calls);
  std::map<int, int> first_met;  // layer -> where the walk first met it
  const std::vector<int> post_order = walk_from_outputs(nodes, outputs, first_met);
  // Consumers before producers: each node's depth is final when it is reached.
  std::vector<int> node_depth(nodes.count(), 0);
  std::map<int, int> layer_depth;
  for (auto it = post_order.rbegin(); it != post_order.rend(); ++it) {
    const int depth = std::max(node_depth[nodes.slot(*it)], layer_depth[nodes.layer(*it)]);
    layer_depth[nodes.layer(*it)] = depth;
    node_depth[nodes.slot(*it)] = depth;
    for (int in : nodes.reads(*it))
      node_depth[nodes.slot(in)] = std::max(node_depth[nodes.slot(in)], depth + 1);
  }
  // An input no output reads comes with the shallowest, first.
  for (std::size_t i = 0; i < input_count; ++i) {
    const int input = -1 - static_cast<int>(i);
    if (layer_depth.try_emplace(input, 0).second) first_met[input] = -1;
  }
  std::vector<std::pair<std::pair<int, int>, int>> keyed;  // (-depth, first met), layer
  for (const auto& [layer, depth] : layer_depth)
    keyed.push_back({{-depth, first_met.at(layer)}, layer});
  std::sort(keyed.begin(), keyed.end());
  std::vector<int> order;
  for (const auto& entry : keyed) order.push_back(entry.second);
  return order;
}

}  // namespace tandem::nn
