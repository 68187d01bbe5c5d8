/**
 * grpc.health.v1.Health/Check as a @grpc/grpc-js method definition (protobuf-es messages on the
 * wire), for the tests and the bench that put a grpc-js server opposite railfence's code.
 */
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import type * as grpc from "@grpc/grpc-js";
import {
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from "../../services/shared/gen/grpc/health/v1/health_pb.js";

export const grpcJsHealthCheck: grpc.MethodDefinition<HealthCheckRequest, HealthCheckResponse> = {
  path: "/grpc.health.v1.Health/Check",
  requestStream: false,
  responseStream: false,
  requestSerialize: (m) => Buffer.from(toBinary(HealthCheckRequestSchema, m)),
  requestDeserialize: (b) => fromBinary(HealthCheckRequestSchema, b),
  responseSerialize: (m) => Buffer.from(toBinary(HealthCheckResponseSchema, m)),
  responseDeserialize: (b) => fromBinary(HealthCheckResponseSchema, b),
};
