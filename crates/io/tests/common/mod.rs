//! An assertion the io port tests share (every helper that is not about
//! io's ports comes from linerate_testkit).
#![allow(dead_code)]

/// A batch belongs to the port that filled it: `batch` holds frames that
/// `a` received; `b` refuses to take them back and to receive more into
/// the batch, and changes nothing (the same descriptors, the same bytes);
/// `a` then takes them back, and the empty batch is released anywhere.
pub fn release_elsewhere_is_refused(
    a: &mut dyn linerate_io::RxPort,
    b: &mut dyn linerate_io::RxPort,
    batch: &mut linerate_io::Batch,
) {
    let seen = |bt: &linerate_io::Batch| -> Vec<(usize, u64, Vec<u8>)> {
        bt.pkts()
            .iter()
            .map(|p| (p.as_ptr() as usize, p.handle(), p.bytes().to_vec()))
            .collect()
    };
    let before = seen(batch);
    assert!(
        !before.is_empty(),
        "the batch holds no frame of the first port"
    );
    let e = b.release(batch).unwrap_err().to_string();
    assert!(e.contains("released into") && !e.contains('\n'), "{e}");
    assert_eq!(seen(batch), before, "a refused release changed the batch");
    let e = b.recv(batch).unwrap_err().to_string();
    assert!(e.contains("received into by"), "{e}");
    assert_eq!(seen(batch), before, "a refused recv changed the batch");
    a.release(batch).unwrap();
    assert!(batch.is_empty());
    b.release(batch).unwrap();
}
