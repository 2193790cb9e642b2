// Links to other files, not followed. An HDF5 external link names another file and a path in it;
// following one opens that file — any file the user can read, a FIFO (whose open blocks), a huge
// or endless one — so a checkpoint or a data file downloaded from elsewhere could make Tandem read
// what it does not hold. Tandem opens groups, datasets and links through access lists on which
// HDF5 refuses to follow them (a soft link inside the file is followed, and refused if it leads
// through an external one), and names the link it refused. docs/security.md.
//
// Use only while holding hdf5_mutex() (io/hdf5_lock.hpp), which also guards the refused target.
#pragma once

#include <hdf5.h>

#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// Makes HDF5 refuse to follow external links on `access_list` (a link, group or dataset access
/// list), recording each refused link's target for take_refused_external_link().
void refuse_external_links(hid_t access_list);

/// Access lists made so (once; they live as long as the process): for H5Lexists, H5Lget_info and
/// H5Oexists_by_name, for H5Gopen2, and for H5Dopen2.
hid_t local_link_access();
hid_t local_group_access();
hid_t local_dataset_access();

/// The target ("other.h5:/x") of the last external link HDF5 refused to follow since the last
/// call, "" when none; clears it. A failed open whose path crossed such a link says so.
std::string take_refused_external_link();

}  // namespace tandem

TANDEM_INTERNAL_API_END
