// Private (nn): the DenseProducts (backend/ops.hpp) of a layer's product with one kernel, made by
// the layer's current backend: Dense's, and each of MultiHeadAttention's four projections.
// Thread-safety: as the layer's (one thread at a time).
#pragma once

#include <memory>

#include "backend/ops.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class DenseProductsOf {
 public:
  /// The products `ops` makes for desc: made on the first call, again after the layer moved to
  /// another backend or after reset(). The reference lives until then.
  backend::DenseProducts& of(backend::Backend& ops, const backend::DenseProductDesc& desc) {
    if (!products_ || made_by_ != &ops) {
      products_ = ops.dense_products(desc);
      made_by_ = &ops;
    }
    return *products_;
  }
  /// Forgets the products (a rebuilt layer's shapes may have changed).
  void reset() {
    products_.reset();
    made_by_ = nullptr;
  }

 private:
  std::unique_ptr<backend::DenseProducts> products_;
  const backend::Backend* made_by_ = nullptr;  // the backend products_ came from
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
