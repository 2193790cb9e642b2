// NumPy's .npz archives (np.savez, np.savez_compressed): a zip file of .npy members, one per
// array (io/zip_archive.hpp reads them). A stored (uncompressed) member is located in the
// archive so that it can be mapped in place; a deflated one is inflated into memory, its CRC
// checked. Stateless; any thread (each call opens the archive on its own).
#pragma once

#include <string>
#include <vector>

#include "io/zip_archive.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::data {

/// The arrays of `file`, in archive order (member names without ".npy"). DataError naming the
/// file when it is not a readable zip archive.
std::vector<std::string> npz_array_names(const std::string& file);

/// The member holding array `name` (`name` its array name: "x" for member "x.npy"). DataError
/// naming the file and the array when it is missing (the message lists the arrays there are),
/// encrypted, compressed other than by deflate, or corrupt (a CRC or size mismatch).
ZipMember read_npz_member(const std::string& file, const std::string& name);

}  // namespace tandem::data

TANDEM_INTERNAL_API_END
