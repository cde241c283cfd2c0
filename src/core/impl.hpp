// src/core/impl.hpp — the state behind remora's public handles (remora::detail), by concern:
//   domain_impl.hpp      domain, memory regions, unique_fd, deadline_after, endpoint_hints
//   op_pool.hpp          the operation record (op_record) and a connection's records (op_pool)
//   holding.hpp          what an operation holds for the layers above, type-erased
//   cq_impl.hpp          completion queues (private and shared), channels, the progress thread
//   connection_impl.hpp  connections and the posting steps their operations share
//   extension.hpp        what a layer above attaches to a connection (persistence)
#pragma once

#include "core/connection_impl.hpp"
#include "core/cq_impl.hpp"
#include "core/domain_impl.hpp"
#include "core/extension.hpp"
#include "core/holding.hpp"
#include "core/op_pool.hpp"
