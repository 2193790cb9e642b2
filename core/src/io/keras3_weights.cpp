#include "io/keras3_weights.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tandem {

namespace {

using hdf5::group_members;
using hdf5::GroupMember;
using hdf5::link_exists;
using hdf5::open_group;

// Position i of a vars group: its datasets are named "0", "1", ... (Keras' str(i)).
std::size_t position_of(const std::string& name, const std::string& where) {
  const bool number = !name.empty() && name.size() <= 9 &&
                      name.find_first_not_of("0123456789") == std::string::npos &&
                      (name == "0" || name[0] != '0');
  if (!number)
    throw std::runtime_error("'" + where + "/" + name +
                             "' is not a weight: a vars group holds datasets named 0, 1, ...");
  return std::stoul(name);
}

// The datasets of vars group `vars` (at `where`) as weights `prefix` + "0", "1", ... in order.
void read_vars(hid_t vars, const std::string& where, const std::string& prefix,
               hdf5::WeightBudget& budget, std::vector<NamedTensor>& out) {
  std::vector<std::pair<std::size_t, std::string>> numbered;
  for (const GroupMember& m : group_members(vars, where)) {
    if (m.is_group)
      throw std::runtime_error("'" + where + "/" + m.name +
                               "' is a group: a vars group holds datasets named 0, 1, ...");
    numbered.emplace_back(position_of(m.name, where), m.name);
  }
  std::sort(numbered.begin(), numbered.end());
  for (std::size_t i = 0; i < numbered.size(); ++i) {
    if (numbered[i].first != i)
      throw std::runtime_error("'" + where + "' has no dataset '" + std::to_string(i) +
                               "' but one numbered " + numbered[i].second +
                               " (a layer's weights are numbered 0, 1, ... without a gap)");
    const std::string& name = numbered[i].second;
    out.push_back({prefix + name, hdf5::read_tensor(vars, name, where + "/" + name, &budget)});
  }
}

// The weights of the object whose group is `group` (at `where`): its vars, then its sublayers'.
void read_object(hid_t group, const std::string& where, const std::string& prefix,
                 hdf5::WeightBudget& budget, std::vector<NamedTensor>& out) {
  const std::vector<GroupMember> members = group_members(group, where);
  for (const GroupMember& m : members)
    if (m.name == "vars") {
      if (!m.is_group)
        throw std::runtime_error("'" + where + "/vars' is a dataset, not a group of weights");
      H5Handle vars = open_group(group, "vars", where + "/vars");
      read_vars(vars.get(), where + "/vars", prefix, budget, out);
    }
  for (const GroupMember& m : members) {
    if (m.name == "vars") continue;
    if (!m.is_group)
      throw std::runtime_error("'" + where + "/" + m.name +
                               "' is a dataset outside a vars group (Keras 3 keeps an object's "
                               "weights in its vars group)");
    H5Handle sub = open_group(group, m.name, where + "/" + m.name);
    read_object(sub.get(), where + "/" + m.name, prefix + m.name + "/", budget, out);
  }
}

}  // namespace

bool has_keras3_weights_layout(hid_t root) {
  return link_exists(root, "layers");
}

std::vector<LayerWeights> read_keras3_layers(hid_t root, hdf5::WeightBudget& budget) {
  if (link_exists(root, "vars")) {
    H5Handle own = open_group(root, "vars", "/vars");
    if (!group_members(own.get(), "/vars").empty())
      throw std::runtime_error(
          "/vars holds variables of the model itself, outside its layers (a subclassed "
          "model's?); a Tandem model's weights are all its layers'");
  }
  H5Handle layers = open_group(root, "layers", "/layers");
  std::vector<LayerWeights> out;
  for (const GroupMember& m : group_members(layers.get(), "/layers")) {
    if (!m.is_group)
      throw std::runtime_error("'/layers/" + m.name +
                               "' is a dataset: /layers holds a group per layer");
    H5Handle layer = open_group(layers.get(), m.name, "/layers/" + m.name);
    LayerWeights lw{m.name, {}};
    read_object(layer.get(), "/layers/" + m.name, "", budget, lw.weights);
    out.push_back(std::move(lw));
  }
  return out;
}

}  // namespace tandem
