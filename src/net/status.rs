//! The one status code of the two RPC protocols: gRPC's seventeen codes
//! (grpc/doc/statuscodes.md), which Connect reuses under snake_case names.
//! A [`Code`] is chosen once by a front-end and rendered by the wire that
//! carries it:
//!
//! | rendering | where it goes | method |
//! |---|---|---|
//! | the number | gRPC's `grpc-status` trailer (sandboxd; the `sandboxd` feature) | [`Code::grpc`] |
//! | the name | a Connect error's `code` field (envd) | [`Code::connect`] |
//! | an HTTP status | a Connect *unary* error's response status | [`Code::http`] |
//!
//! The two wires differ in where the code travels, not in its meaning, and
//! each keeps its own answer: a gRPC response is always HTTP `200` (the
//! number is in the trailers), and so is a Connect stream (the name is in
//! its end-of-stream message); only a Connect unary error uses
//! [`Code::http`], Connect's table (connectrpc.com `docs/protocol.md`, the
//! version that maps `unimplemented` to `501`). `Ok` is a gRPC answer only:
//! Connect sends no code on success, so its name and status exist for
//! completeness and no envd answer carries them.
//!
//! A gate refusal has one code on both RPC wires ([`Code::from`] a
//! [`Refusal`]).
//!
//! What it is not: a status *message* (each wire encodes its text its own
//! way: JSON in Connect, percent-encoding in `grpc-message`), and not the
//! upper-case names of sandboxd's REST error bodies.

use hyper::StatusCode;

use super::gate::Refusal;

/// A gRPC status code, the same seventeen Connect names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    dead_code,
    reason = "the protocols' whole list: each front-end constructs the codes it answers, \
              and which those are depends on the `sandboxd` feature (so not `expect`)"
)]
pub enum Code {
    /// `0`: success (gRPC only).
    Ok,
    /// `1` `canceled` (Connect's spelling; gRPC's `CANCELLED`).
    Canceled,
    /// `2` `unknown`.
    Unknown,
    /// `3` `invalid_argument`.
    InvalidArgument,
    /// `4` `deadline_exceeded`.
    DeadlineExceeded,
    /// `5` `not_found`.
    NotFound,
    /// `6` `already_exists`.
    AlreadyExists,
    /// `7` `permission_denied`.
    PermissionDenied,
    /// `8` `resource_exhausted`.
    ResourceExhausted,
    /// `9` `failed_precondition`.
    FailedPrecondition,
    /// `10` `aborted`.
    Aborted,
    /// `11` `out_of_range`.
    OutOfRange,
    /// `12` `unimplemented`.
    Unimplemented,
    /// `13` `internal`.
    Internal,
    /// `14` `unavailable`.
    Unavailable,
    /// `15` `data_loss`.
    DataLoss,
    /// `16` `unauthenticated`.
    Unauthenticated,
}

impl Code {
    /// Every code with its three renderings: (code, gRPC number, Connect
    /// name, Connect's HTTP status). The methods below read this table, so
    /// a code has one row and the renderings cannot disagree.
    const TABLE: [(Code, u8, &'static str, u16); 17] = [
        (Code::Ok, 0, "ok", 200),
        (Code::Canceled, 1, "canceled", 499),
        (Code::Unknown, 2, "unknown", 500),
        (Code::InvalidArgument, 3, "invalid_argument", 400),
        (Code::DeadlineExceeded, 4, "deadline_exceeded", 504),
        (Code::NotFound, 5, "not_found", 404),
        (Code::AlreadyExists, 6, "already_exists", 409),
        (Code::PermissionDenied, 7, "permission_denied", 403),
        (Code::ResourceExhausted, 8, "resource_exhausted", 429),
        (Code::FailedPrecondition, 9, "failed_precondition", 400),
        (Code::Aborted, 10, "aborted", 409),
        (Code::OutOfRange, 11, "out_of_range", 400),
        (Code::Unimplemented, 12, "unimplemented", 501),
        (Code::Internal, 13, "internal", 500),
        (Code::Unavailable, 14, "unavailable", 503),
        (Code::DataLoss, 15, "data_loss", 500),
        (Code::Unauthenticated, 16, "unauthenticated", 401),
    ];

    /// This code's row of [`Code::TABLE`]; the rows are in gRPC order, so
    /// the discriminant is the index.
    fn row(self) -> (Code, u8, &'static str, u16) {
        Code::TABLE[self as usize]
    }

    /// The number gRPC sends in `grpc-status` (only sandboxd speaks gRPC).
    #[cfg(feature = "sandboxd")]
    pub fn grpc(self) -> u8 {
        self.row().1
    }

    /// The name Connect sends in an error's `code` (snake_case).
    pub fn connect(self) -> &'static str {
        self.row().2
    }

    /// The HTTP status of a Connect unary error with this code (gRPC and
    /// Connect streams answer `200` whatever the code).
    pub fn http(self) -> StatusCode {
        StatusCode::from_u16(self.row().3).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl From<Refusal> for Code {
    /// The code a gate refusal answers with on an RPC wire: no token is
    /// `unauthenticated`, a foreign Host or Origin `permission_denied`, more
    /// than one Host `invalid_argument`.
    fn from(r: Refusal) -> Code {
        match r {
            Refusal::Token(_) => Code::Unauthenticated,
            Refusal::Forbidden(_) => Code::PermissionDenied,
            Refusal::Host(_) => Code::InvalidArgument,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Today's wire values, written out by hand: (gRPC number, Connect
    /// name, HTTP status of a Connect unary error).
    const WIRE: [(Code, u8, &str, u16); 17] = [
        (Code::Ok, 0, "ok", 200),
        (Code::Canceled, 1, "canceled", 499),
        (Code::Unknown, 2, "unknown", 500),
        (Code::InvalidArgument, 3, "invalid_argument", 400),
        (Code::DeadlineExceeded, 4, "deadline_exceeded", 504),
        (Code::NotFound, 5, "not_found", 404),
        (Code::AlreadyExists, 6, "already_exists", 409),
        (Code::PermissionDenied, 7, "permission_denied", 403),
        (Code::ResourceExhausted, 8, "resource_exhausted", 429),
        (Code::FailedPrecondition, 9, "failed_precondition", 400),
        (Code::Aborted, 10, "aborted", 409),
        (Code::OutOfRange, 11, "out_of_range", 400),
        (Code::Unimplemented, 12, "unimplemented", 501),
        (Code::Internal, 13, "internal", 500),
        (Code::Unavailable, 14, "unavailable", 503),
        (Code::DataLoss, 15, "data_loss", 500),
        (Code::Unauthenticated, 16, "unauthenticated", 401),
    ];

    #[test]
    fn each_code_renders_as_todays_connect_name_and_http_status() {
        for (code, _, name, status) in WIRE {
            assert_eq!(code.connect(), name, "{code:?}'s Connect name");
            assert_eq!(code.http().as_u16(), status, "{code:?}'s HTTP status");
        }
    }

    #[test]
    #[cfg(feature = "sandboxd")]
    fn each_code_renders_as_todays_grpc_status_number() {
        for (code, number, ..) in WIRE {
            assert_eq!(code.grpc(), number, "{code:?}'s grpc-status");
        }
    }

    #[test]
    fn every_row_of_the_table_belongs_to_its_own_code() {
        for (i, row) in Code::TABLE.iter().enumerate() {
            assert_eq!(row.0 as usize, i, "row {i} is {:?}", row.0);
            assert_eq!(usize::from(row.1), i, "{:?}'s number", row.0);
        }
    }

    #[test]
    fn a_gate_refusal_is_unauthenticated_permission_denied_or_invalid_argument() {
        assert_eq!(Code::from(Refusal::Token("t")), Code::Unauthenticated);
        assert_eq!(Code::from(Refusal::Forbidden("f")), Code::PermissionDenied);
        assert_eq!(Code::from(Refusal::Host("h")), Code::InvalidArgument);
    }
}
