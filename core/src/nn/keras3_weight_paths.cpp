#include "nn/keras3_weight_paths.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "nn/layer_wrapper.hpp"
#include "nn/stacked_rnn.hpp"

namespace tandem::nn {

namespace {

bool upper(char c) {
  return c >= 'A' && c <= 'Z';
}
bool lower(char c) {
  return c >= 'a' && c <= 'z';
}

// re.sub("(.)([A-Z][a-z]+)", r"\1_\2", s): an underscore before each capitalised word that
// follows a character, matches taken left to right without overlap.
std::string split_words(const std::string& s) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    if (i + 2 < s.size() && upper(s[i + 1]) && lower(s[i + 2])) {
      std::size_t end = i + 2;
      while (end < s.size() && lower(s[end])) ++end;
      out += s[i];
      out += '_';
      out.append(s, i + 1, end - i - 1);
      i = end;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// re.sub("([a-z])([A-Z])", r"\1_\2", s).
std::string split_humps(const std::string& s) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && lower(s[i]) && upper(s[i + 1])) {
      out += s[i];
      out += '_';
      out += s[i + 1];
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// The attribute of a MultiHeadAttention (and a GroupedQueryAttention) that holds its sublayer
// named so in Keras 2.
const std::map<std::string, std::string>& attention_attributes() {
  static const std::map<std::string, std::string> attributes{{"query", "query_dense"},
                                                             {"key", "key_dense"},
                                                             {"value", "value_dense"},
                                                             {"attention_output", "output_dense"}};
  return attributes;
}

}  // namespace

std::string keras_snake_case(std::string_view class_name) {
  std::string word;  // re.sub(r"\W+", "", name)
  for (char c : class_name)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') word += c;
  std::string out = split_humps(split_words(word));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string> keras3_layer_groups(const std::vector<std::string>& classes) {
  std::map<std::string, int> used;
  std::vector<std::string> groups;
  for (const std::string& cls : classes) {
    const std::string name = keras_snake_case(cls);
    auto [it, first] = used.emplace(name, 0);
    if (first) {
      groups.push_back(name);
    } else {
      groups.push_back(name + "_" + std::to_string(++it->second));
    }
  }
  return groups;
}

std::vector<std::string> keras3_weight_names(const std::string& class_name,
                                             const std::vector<std::string>& keras2_names) {
  std::map<std::string, int> position;  // per owner: "" the layer, else its sublayer attribute
  std::vector<std::string> names;
  for (const std::string& name : keras2_names) {
    std::string owner;
    if (const std::size_t slash = name.rfind('/'); slash != std::string::npos) {
      owner = name.substr(0, slash);
      if (class_name == "MultiHeadAttention" || class_name == "GroupedQueryAttention")
        if (auto it = attention_attributes().find(owner); it != attention_attributes().end())
          owner = it->second;
      // A recurrent layer keeps its cell ("lstm_cell", "conv_lstm_cell" in Keras 2's names; an
      // RNN's, its cell's own name) as attribute `cell`.
      if (class_name == "LSTM" || class_name == "GRU" || class_name == "SimpleRNN" ||
          class_name == "RNN" || class_name.rfind("ConvLSTM", 0) == 0)
        owner = "cell";
      // A Bidirectional's layers ("forward_lstm/lstm_cell") as attributes forward_layer and
      // backward_layer, each with its `cell`.
      if (class_name == "Bidirectional")
        owner = (owner.rfind("backward_", 0) == 0 ? "backward_layer" : "forward_layer") +
                std::string("/cell");
    }
    const std::string index = std::to_string(position[owner]++);
    names.push_back(owner.empty() ? index : owner + "/" + index);
  }
  return names;
}

namespace {

// An RNN over StackedRNNCells: its cell's list `cells` holds each cell under its class's name
// (numbered as Keras 3 numbers a container's), the cell's weights in order.
std::vector<std::string> stacked_cell_weight_names(const StackedRnn& stack,
                                                   const std::vector<std::string>& keras2_names) {
  const std::vector<std::string> groups = keras3_layer_groups(stack.cell_classes());
  std::vector<std::string> names;
  std::size_t cell = 0, index = 0;
  std::string owner;  // the Keras 2 name's "<stack>/<cell>" of the weight before
  for (const std::string& name : keras2_names) {
    const std::string own = name.substr(0, name.rfind('/'));
    if (!names.empty() && own != owner) {
      ++cell;
      index = 0;
    }
    owner = own;
    names.push_back("cell/cells/" + groups.at(cell) + "/" + std::to_string(index++));
  }
  return names;
}

}  // namespace

std::vector<std::string> keras3_weight_names(Layer& layer,
                                             const std::vector<std::string>& keras2_names) {
  if (const auto* stack = dynamic_cast<const StackedRnn*>(&layer))
    return stacked_cell_weight_names(*stack, keras2_names);
  // A wrapper keeps its layer's weights under the attribute `layer`, then its own
  // (SpectralNormalization's vector_u).
  auto* wrapper = dynamic_cast<LayerWrapper*>(&layer);
  if (!wrapper) return keras3_weight_names(layer.class_name(), keras2_names);
  Layer* inner = &wrapper->inner();
  const std::size_t wrapped = std::min(inner->parameters().size(), keras2_names.size());
  std::vector<std::string> names = keras3_weight_names(
      *inner, std::vector<std::string>(keras2_names.begin(), keras2_names.begin() + wrapped));
  for (std::string& n : names) n = "layer/" + n;
  for (std::size_t own = 0; own + wrapped < keras2_names.size(); ++own)
    names.push_back(std::to_string(own));
  return names;
}

std::string keras3_private_spelling(const std::string& weight_name) {
  if (weight_name.find('/') == std::string::npos) return "";
  return "_" + weight_name;
}

}  // namespace tandem::nn
