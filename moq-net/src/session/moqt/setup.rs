//! SETUP on moq-transport: what each side sends, and what it checks in the peer's.
//!
//! spec: draft-ietf-moq-transport-14 § "CLIENT_SETUP and SERVER_SETUP" (the version list
//! and the selected version), -16 and -18 § "SETUP" (no version: the ALPN chose it). PATH
//! is a client's parameter, on raw QUIC only (the driver sets [`SessionConfig::path`] only
//! there); MAX_REQUEST_ID is 14's and 16's grant.
//!
//! [`SessionConfig::path`]: super::super::SessionConfig::path

use super::MoqtState;
use crate::Error;
use crate::coding::Setup;
use crate::moqt::{ClientSetup, ServerSetup, SetupOptions};
use crate::session::Side;
use crate::session::context::Context;

/// The MOQT_IMPLEMENTATION this side names in its SETUP.
const IMPLEMENTATION: &str = concat!("moqx/", env!("CARGO_PKG_VERSION"));

/// This side's SETUP options.
fn options(cx: &Context, moqt: &MoqtState) -> SetupOptions {
    SetupOptions {
        path: match moqt.side() {
            Side::Client => cx.config.path.clone(),
            Side::Server => None,
        },
        max_request_id: moqt
            .draft
            .has_request_id_flow_control()
            .then(|| moqt.max_request_id()),
        implementation: moqt
            .draft
            .implementation_parameter()
            .map(|_| IMPLEMENTATION.to_owned()),
        ..SetupOptions::default()
    }
}

/// The client's SETUP: on 14 it offers 14's version number alone.
pub(super) fn client_setup(cx: &Context, moqt: &MoqtState) -> ClientSetup {
    ClientSetup {
        versions: match moqt.draft.has_setup_versions() {
            true => vec![moqt.draft.version_number()],
            false => Vec::new(),
        },
        options: options(cx, moqt),
    }
}

/// The server's SETUP: on 14 it names the version it selected.
pub(super) fn server_setup(cx: &Context, moqt: &MoqtState) -> ServerSetup {
    ServerSetup {
        version: moqt
            .draft
            .has_setup_versions()
            .then(|| moqt.draft.version_number()),
        options: options(cx, moqt),
    }
}

/// This side's SETUP, encoded for its control stream.
pub(super) fn encoded_setup(cx: &Context) -> Result<Vec<u8>, Error> {
    use crate::moqt::Control as _;
    let moqt = cx.moqt.as_ref().ok_or(Error::ProtocolViolation)?;
    let draft = moqt.draft;
    let encoded = match moqt.side() {
        Side::Client => client_setup(cx, moqt).to_vec(draft),
        Side::Server => server_setup(cx, moqt).to_vec(draft),
    };
    tracing::debug!(draft = ?draft, "sending SETUP");
    encoded.map_err(|error| {
        tracing::debug!(%error, "could not encode SETUP");
        Error::Encode
    })
}

/// A server reads the client's SETUP: on 14 the client must offer 14's version
/// (VERSION_NEGOTIATION_FAILED otherwise). The authorization hook decides on it; on 18 a
/// server whose SETUP waited for the hook opens its control stream now.
pub(super) fn receive_client_setup(cx: &mut Context, setup: ClientSetup) -> Result<(), Error> {
    let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
    tracing::debug!(?setup, "the client's SETUP");
    let draft = moqt.draft;
    if draft.has_setup_versions() && !setup.versions.contains(&draft.version_number()) {
        tracing::debug!(
            offered = ?setup.versions,
            ours = draft.version_number(),
            "the client offers no version this side speaks"
        );
        return Err(Error::Version);
    }
    moqt.peer_max_request_id = setup.options.max_request_id.unwrap_or(0);
    let lite = Setup {
        path: setup.options.path,
        ..Setup::default()
    };
    let hooked = crate::session::setup::run_authorize_hook(cx, &lite).inspect_err(|error| {
        tracing::debug!(%error, "the authorization hook refused the client");
    })?;
    if hooked && !draft.has_request_id_flow_control() {
        // 18: this side's control stream waited for the hook's decision.
        cx.opens.push_back(crate::session::task::Open::Setup);
    }
    setup_done(cx, lite);
    Ok(())
}

/// A client reads the server's SETUP: on 14 it must select 14's version, and a server
/// names no PATH.
pub(super) fn receive_server_setup(cx: &mut Context, setup: ServerSetup) -> Result<(), Error> {
    let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
    tracing::debug!(?setup, "the server's SETUP");
    let draft = moqt.draft;
    if draft.has_setup_versions() && setup.version != Some(draft.version_number()) {
        tracing::debug!(
            selected = ?setup.version,
            "the server selected a version this client did not offer"
        );
        return Err(Error::Version);
    }
    if setup.options.path.is_some() {
        tracing::debug!("the server's SETUP carries PATH, a client's parameter");
        return Err(Error::ProtocolViolation);
    }
    moqt.peer_max_request_id = setup.options.max_request_id.unwrap_or(0);
    setup_done(cx, Setup::default());
    // Established: a client publisher announces what it publishes, a client subscriber
    // asks for what the server has.
    if let Some(announcements) = super::Announcements::unsolicited(cx) {
        cx.spawned
            .push(crate::session::task::Spawn::MoqtAnnounce(announcements));
    }
    if cx.config.subscribe.is_some() {
        super::discovery::follow(cx)?;
    }
    Ok(())
}

/// The peer's SETUP arrived: the session is established.
fn setup_done(cx: &mut Context, setup: Setup) {
    cx.setup_received = true;
    cx.sources_changed = true;
    cx.peer_setup = Some(setup);
}
