// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/remora.hpp — everything public: includes every public C++ header. Start here (see the
/// main page); C programs include remora/remora.h.
#pragma once

#include <remora/admission.hpp>
#include <remora/buffer_pool.hpp>
#include <remora/completion_channel.hpp>
#include <remora/completion_queue.hpp>
#include <remora/connection.hpp>
#include <remora/coro.hpp>
#include <remora/domain.hpp>
#include <remora/listener.hpp>
#include <remora/log.hpp>
#include <remora/memory_region.hpp>
#include <remora/op_options.hpp>
#include <remora/persistence.hpp>
#include <remora/persistent_region.hpp>
#include <remora/receive_pool.hpp>
#include <remora/registration_cache.hpp>
#include <remora/remote_region.hpp>
#include <remora/replica_set.hpp>
#include <remora/result.hpp>
#include <remora/shared_receive_queue.hpp>
#include <remora/slot_pool.hpp>
#include <remora/target_service.hpp>
#include <remora/units.hpp>
#include <remora/version.hpp>

/// \namespace remora
/// remora's public C++ API: every class, function and constant of include/remora/*.hpp.
/// Internals live elsewhere and are never named by a public header.
