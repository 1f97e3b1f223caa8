use super::*;

/// What SUBSCRIBE allows (its subscription parameters among them).
const SUBSCRIBE: &[Param] = crate::moqt::SUBSCRIBE_PARAMETERS;

fn encoded(parameters: &MessageParameters, draft: Draft, allowed: &[Param]) -> Vec<u8> {
    let mut out = Vec::new();
    parameters.encode(&mut out, draft, allowed).unwrap();
    out
}

fn subscription() -> MessageParameters {
    MessageParameters {
        forward: Some(true),
        subscriber_priority: Some(128),
        filter: Some(Filter::LargestObject),
        group_order: Some(GroupOrder::Ascending),
        ..MessageParameters::default()
    }
}

#[test]
fn draft_16_writes_subscription_parameters_as_pairs() {
    #[rustfmt::skip]
    let bytes = [
        0x04,               // 4 parameters
        0x10, 0x01,         // +0x10 = FORWARD 1
        0x10, 0x40, 0x80,   // +0x10 = SUBSCRIBER_PRIORITY 128
        0x01, 0x01, 0x02,   // +1 = SUBSCRIPTION_FILTER, 1 byte: Largest Object
        0x01, 0x01,         // +1 = GROUP_ORDER ascending
    ];
    assert_eq!(encoded(&subscription(), Draft::D16, SUBSCRIBE), bytes);
    assert_eq!(
        MessageParameters::decode(&mut &bytes[..], Draft::D16, SUBSCRIBE),
        Ok(subscription())
    );
}

#[test]
fn draft_18_writes_each_parameter_in_its_own_encoding() {
    #[rustfmt::skip]
    let bytes = [
        0x04,
        0x10, 0x01,         // FORWARD: uint8
        0x10, 0x80,         // SUBSCRIBER_PRIORITY: uint8
        0x01, 0x01, 0x02,   // SUBSCRIPTION_FILTER: length-prefixed
        0x01, 0x01,         // GROUP_ORDER: uint8
    ];
    assert_eq!(encoded(&subscription(), Draft::D18, SUBSCRIBE), bytes);
    assert_eq!(
        MessageParameters::decode(&mut &bytes[..], Draft::D18, SUBSCRIBE),
        Ok(subscription())
    );
    // LARGEST_OBJECT is a bare location on 18, a length-prefixed one on 16.
    let largest = MessageParameters {
        largest_object: Some(Location {
            group: 7,
            object: 3,
        }),
        ..MessageParameters::default()
    };
    let allowed = [Param::LargestObject];
    assert_eq!(
        encoded(&largest, Draft::D18, &allowed),
        [0x01, 0x09, 0x07, 0x03]
    );
    assert_eq!(
        encoded(&largest, Draft::D16, &allowed),
        [0x01, 0x09, 0x02, 0x07, 0x03]
    );
}

#[test]
fn draft_14_ignores_what_it_does_not_know_and_keeps_it() {
    let mut parameters = MessageParameters {
        delivery_timeout: Some(Duration::from_millis(500)),
        authorization_tokens: vec![Bytes::from_static(b"t1"), Bytes::from_static(b"t2")],
        max_cache_duration: Some(Duration::from_secs(10)),
        ..MessageParameters::default()
    };
    let allowed = [
        Param::DeliveryTimeout,
        Param::AuthorizationToken,
        Param::MaxCacheDuration,
    ];
    let mut bytes = encoded(&parameters, Draft::D14, &allowed);
    // One more pair, of a type 14 does not define (0x20: even, an integer).
    bytes[0] += 1;
    bytes.extend_from_slice(&[0x20, 0x05]);
    parameters.unknown = Parameters(vec![Parameter::int(0x20, 5)]);
    assert_eq!(
        MessageParameters::decode(&mut &bytes[..], Draft::D14, &allowed),
        Ok(parameters.clone())
    );
    // A known parameter this message does not allow is ignored, not refused.
    let fewer = MessageParameters::decode(&mut &bytes[..], Draft::D14, &[Param::DeliveryTimeout]);
    assert_eq!(fewer.unwrap().authorization_tokens, Vec::<Bytes>::new());
}

#[test]
fn unknown_and_misplaced_parameters_close_the_session_where_the_draft_says() {
    // An unknown type (0x30) on 16 and 18.
    assert_eq!(
        MessageParameters::decode(&mut &[0x01, 0x30, 0x00][..], Draft::D16, SUBSCRIBE),
        Err(DecodeError::UnknownParameter(0x30))
    );
    assert_eq!(
        MessageParameters::decode(&mut &[0x01, 0x30, 0x00][..], Draft::D18, SUBSCRIBE),
        Err(DecodeError::UnknownParameter(0x30))
    );
    // EXPIRES (0x08) where it is not allowed: ignored on 16, refused on 18.
    let expires = [0x01, 0x08, 0x05];
    assert_eq!(
        MessageParameters::decode(&mut &expires[..], Draft::D16, SUBSCRIBE),
        Ok(MessageParameters::default())
    );
    assert_eq!(
        MessageParameters::decode(&mut &expires[..], Draft::D18, SUBSCRIBE),
        Err(DecodeError::ParameterNotAllowed(0x08))
    );
}

#[test]
fn values_and_repeats_are_checked() {
    // FORWARD 2.
    assert_eq!(
        MessageParameters::decode(&mut &[0x01, 0x10, 0x02][..], Draft::D16, SUBSCRIBE),
        Err(DecodeError::InvalidValue("FORWARD"))
    );
    // SUBSCRIBER_PRIORITY 256 (a varint on 16).
    assert_eq!(
        MessageParameters::decode(&mut &[0x01, 0x20, 0x41, 0x00][..], Draft::D16, SUBSCRIBE),
        Err(DecodeError::InvalidValue("SUBSCRIBER_PRIORITY"))
    );
    // GROUP_ORDER 0.
    assert_eq!(
        MessageParameters::decode(&mut &[0x01, 0x22, 0x00][..], Draft::D18, SUBSCRIBE),
        Err(DecodeError::InvalidValue("group order"))
    );
    // FORWARD twice (delta 0 the second time).
    assert_eq!(
        MessageParameters::decode(
            &mut &[0x02, 0x10, 0x01, 0x00, 0x01][..],
            Draft::D18,
            SUBSCRIBE
        ),
        Err(DecodeError::Duplicate(0x10))
    );
    // A filter with a byte left inside its parameter.
    assert_eq!(
        MessageParameters::decode(
            &mut &[0x01, 0x21, 0x02, 0x02, 0x00][..],
            Draft::D16,
            SUBSCRIBE
        ),
        Err(DecodeError::Long)
    );
}

#[test]
fn what_a_draft_or_message_lacks_is_not_sent() {
    let rendezvous = MessageParameters {
        rendezvous_timeout: Some(Duration::from_secs(1)),
        ..MessageParameters::default()
    };
    assert_eq!(
        rendezvous.encode(&mut Vec::new(), Draft::D16, SUBSCRIBE),
        Err(EncodeError::NotInVersion("RENDEZVOUS_TIMEOUT"))
    );
    assert!(
        rendezvous
            .encode(&mut Vec::new(), Draft::D18, SUBSCRIBE)
            .is_ok()
    );
    assert_eq!(
        subscription().encode(&mut Vec::new(), Draft::D18, &[Param::Forward]),
        Err(EncodeError::NotInVersion("SUBSCRIBER_PRIORITY"))
    );
}

#[test]
fn the_namespace_prefix_is_a_bare_namespace_on_18() {
    let prefix = MessageParameters {
        namespace_prefix: Some(Namespace::from_strs(["room"])),
        ..MessageParameters::default()
    };
    let allowed = [Param::NamespacePrefix];
    let bytes = encoded(&prefix, Draft::D18, &allowed);
    assert_eq!(bytes, [0x01, 0x34, 0x01, 0x04, b'r', b'o', b'o', b'm']);
    assert_eq!(
        MessageParameters::decode(&mut &bytes[..], Draft::D18, &allowed),
        Ok(prefix)
    );
}
