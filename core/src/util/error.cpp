// The key functions of the error classes (tandem/error.hpp): defined here, once, so each class's
// vtable and type_info live in libtandem and an error thrown by a plugin never points into the
// plugin's library, which may be unloaded before the error is caught.
#include "tandem/error.hpp"

namespace tandem {

Error::~Error() = default;
ConfigError::~ConfigError() = default;
DataError::~DataError() = default;
ShapeError::~ShapeError() = default;
RunError::~RunError() = default;

}  // namespace tandem
