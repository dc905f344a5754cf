// What "the same host" means for choosing a transport: ranks with equal identities can map
// each other's shared memory; ranks with equal machine parts share the machine's cores.
#pragma once

#include <string>

namespace ring {

// "hostname|boot id|ipc namespace/pid namespace" of this process.
std::string hostIdentity();

// The machine part of an identity ("host|boot id|namespaces" -> "host|boot id"): ranks in other
// namespaces of the same machine cannot share memory with us but do share its cores.
std::string machineOf(const std::string& identity);

}  // namespace ring
