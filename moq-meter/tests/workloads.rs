//! Every workload of the meter delivers every message exactly once, through the real
//! relay configuration over quiche: a count is only worth what the run it counts did.

use moq_meter::members::Transport;
use moq_meter::workload::Workload;

#[test]
fn a_small_chat_delivers_every_message_to_every_other_member_of_its_room_on_each_transport() {
    for transport in [Transport::Quic, Transport::WebTransport] {
        let workload = Workload::Chat {
            members: 6,
            room: 3,
            size: 100,
        };
        let measured = moq_meter::run(workload, transport, 6, 12).expect("the run");
        assert_eq!(measured.messages, 12, "{transport:?}");
        assert_eq!(
            measured.deliveries,
            12 * 2,
            "{transport:?}: each to the 2 others"
        );
    }
}

#[test]
fn fanout_delivers_every_message_to_every_subscriber() {
    let workload = Workload::Fanout {
        subscribers: 5,
        size: 100,
    };
    let measured = moq_meter::run(workload, Transport::Quic, 2, 10).expect("the run");
    assert_eq!(measured.deliveries, 10 * 5);
}

#[test]
fn media_delivers_every_frame_of_groups_larger_than_a_packet() {
    let workload = Workload::Media {
        subscribers: 3,
        size: 4_000,
        group_frames: 4,
    };
    // Warm-up and measurement both cross group boundaries.
    let measured = moq_meter::run(workload, Transport::Quic, 3, 9).expect("the run");
    assert_eq!(measured.deliveries, 9 * 3);
}

#[test]
fn a_malformed_workload_is_refused_naming_the_parameter() {
    let workload = Workload::Chat {
        members: 7,
        room: 3,
        size: 100,
    };
    let error = moq_meter::run(workload, Transport::Quic, 1, 1)
        .unwrap_err()
        .to_string();
    assert!(error.contains("members"), "{error}");
}
