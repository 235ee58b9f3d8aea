//! Tests of the checker.

use super::*;

fn sample(boot: u16, drained: u64) -> HostSample {
    HostSample {
        boot,
        drained,
        ..HostSample::default()
    }
}

#[test]
fn drain_progress_adds_up_across_a_reboot() {
    // Boot 0 drains 40 -> 70 in the window, boot 1 starts from zero and drains 25.
    let samples = [
        sample(0, 40),
        sample(0, 70),
        sample(1, 0),
        sample(1, 10),
        sample(1, 25),
    ];
    assert_eq!(drained_across_boots(samples.iter()), 30 + 25);
}

#[test]
fn a_boot_that_began_in_the_window_counts_its_first_sample() {
    let samples = [sample(0, 5), sample(0, 5), sample(1, 8)];
    assert_eq!(drained_across_boots(samples.iter()), 8);
    assert_eq!(drained_across_boots([sample(2, 9)].iter()), 0);
    assert_eq!(drained_across_boots(std::iter::empty()), 0);
}
