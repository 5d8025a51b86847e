"""The gRPC services (protobuf types live here and in seats/remote) and the server that hosts them."""
