// Where the `tandem` engine binary is. The dashboard talks to the engine only by running it.
#pragma once

#include <QString>

namespace tandem::gui {

/// The engine to run, first match wins: $TANDEM_ENGINE; `tandem` next to this executable (an
/// installed tree, bin/); ../core/tandem (the build tree); `tandem` on PATH. Returns an empty
/// string when none exists. Thread-safe (reads only).
QString engine_path();

/// A one-line explanation for the user when engine_path() is empty.
QString engine_missing_message();

}  // namespace tandem::gui
