// SPDX-License-Identifier: BSD-3-Clause
// src/core/impl.hpp — the state behind remora's public handles (remora::detail), for the
// endpoint layer's own files (and white-box tests); the layers above include core/upper.hpp
// instead. By concern:
//   domain_impl.hpp      domain, memory regions, unique_fd, deadline_after
//   ../ops/              the operations layer: op_record / op_pool, reservation, done, holdings
//   cq_impl.hpp          completion queues (private and shared), channels, the progress thread
//   connection_impl.hpp  connections and the posting steps their operations share
//   door.hpp             the one door: every post of every layer, and cancel
//   extension.hpp        what a layer above attaches to a connection (persistence)
#pragma once

#include "core/connection_impl.hpp"
#include "core/cq_impl.hpp"
#include "core/domain_impl.hpp"
#include "core/door.hpp"
#include "core/extension.hpp"
#include "ops/done.hpp"
#include "ops/holding.hpp"
#include "ops/op_pool.hpp"
#include "ops/reservation.hpp"
