// The two targets a callback can choose (contract 3): the template and the meta-model.
#include "tandem/error.hpp"
#include "train/trainer.hpp"
#include "train/trainer_view.hpp"

namespace tandem {

std::string target_name(Target target) {
  return target == Target::meta ? "meta" : "template";
}

Trainer::~Trainer() = default;

ModelView& Trainer::target() {
  if (!template_view_) {
    template_view_ = std::make_unique<View>(*this, Target::template_model);
    meta_view_ = std::make_unique<View>(*this, Target::meta);
  }
  return current_target_ == Target::meta ? *meta_view_ : *template_view_;
}

}  // namespace tandem
