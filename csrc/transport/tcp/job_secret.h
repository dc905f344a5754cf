// The optional secret mixed into the TCP handshake's key (wire.h, handshakeKey).
//
// Why: the job token travels through the store, so anyone who can read the store (often any
// process that can reach MASTER_ADDR's port) could prove it. A secret that every rank gets from
// its own environment or a private file, never from the store, closes that gap.
#pragma once

#include <string>

namespace ring {

// TORCH_RING_SECRET, or the contents of the file TORCH_RING_SECRET_FILE names (one trailing
// newline dropped), or "" when neither is set. UsageError, naming the variable, when both are
// set, when the secret is empty, or when the file cannot be read or is readable or writable by
// anyone but its owner (as ssh refuses such a key file).
std::string readJobSecret();

}  // namespace ring
