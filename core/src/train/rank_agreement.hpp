// Ranks of an MPI job that were given different runs: every rank must train the same model on
// data of the same sizes from the same position, or a collective waits forever for a rank that
// finished (another `epochs`) or reads past a message of another size (another `batch_size`, a
// training file with other samples). The ranks compare before the run starts instead. A resumed
// run compares its settings with its checkpoint's run the same way (changes_since_checkpoint).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class Dataset;
class World;

/// The settings that make a run what it is: `resolved` (the run config as resolved) without what
/// each process, or each leg of a resumed run, may hold on its own — verbosity, callbacks, name
/// and the files the data specs name (`path`, `list`, and `x`/`y` of the npy and idx types).
nlohmann::json same_run_settings(nlohmann::json resolved);

/// What a resumed run changes of its checkpoint's run: for each setting of same_run_settings()
/// that differs — but `epochs`, `devices`, `batch_size_per_replica` and the optimizer's
/// `learning_rate`, which a resume may change on purpose — its config path and both values
/// ("loss: \"mse\" before, \"mae\" now"), in config order. `saved`: the checkpoint's resolved run
/// config; `resolved`: this run's.
std::vector<std::string> changes_since_checkpoint(const nlohmann::json& saved,
                                                  const nlohmann::json& resolved);

/// What the ranks must agree on: same_run_settings(resolved), the size and
/// sample shapes of each of `data` (null entries skipped), and `resume_position` (null: a new
/// run). Borrows its arguments for the call.
nlohmann::json rank_fingerprint(const nlohmann::json& resolved,
                                const std::vector<const Dataset*>& data,
                                const nlohmann::json& resume_position);

/// Collective: every rank's fingerprint against rank 0's. On every rank, throws ConfigError (a
/// config key differs) or DataError (the data or the position differ) naming the first rank that
/// differs and the first difference. Nothing to do in a world of one process.
void check_ranks_agree(World& world, const nlohmann::json& fingerprint);

}  // namespace tandem

TANDEM_INTERNAL_API_END
