//! How often the scanner runs: the period bounds and their adaptation to the faults of the last
//! pass (kernel/sched/fair.c, spec §1.9), with the variants of each release.

use crate::kernel::Kernel;
use crate::variants::{UpdateScanPeriod, UpdateTaskScanPeriod};

pub(super) const NSEC_PER_MSEC: u64 = 1_000_000;
/// MAX_SCAN_WINDOW, MB/s
const MAX_SCAN_WINDOW: u32 = 2560;
const NUMA_PERIOD_SLOTS: u64 = 10;
const NUMA_PERIOD_THRESHOLD: u64 = 7;

impl Kernel {
    pub(super) fn scan_pages(&self) -> u64 {
        (self.cfg.sysctl.numa_balancing_scan_size_mb as u64) << 8
    }

    // kernel/sched/fair.c: task_nr_scan_windows
    fn task_nr_scan_windows(&self, t: usize) -> u64 {
        let nr_scan_pages = self.scan_pages().max(1);
        let mut rss = self.mms[self.tasks[t].mm].rss();
        if rss == 0 {
            rss = nr_scan_pages;
        }
        rss.div_ceil(nr_scan_pages)
    }

    // kernel/sched/fair.c: task_scan_min
    pub fn task_scan_min(&self, t: usize) -> u32 {
        let scan_size = self.cfg.sysctl.numa_balancing_scan_size_mb;
        let windows = if scan_size < MAX_SCAN_WINDOW { MAX_SCAN_WINDOW / scan_size.max(1) } else { 1 };
        let floor = 1000 / windows.max(1);
        let scan = self.cfg.sysctl.numa_balancing_scan_period_min_ms as u64 / self.task_nr_scan_windows(t);
        floor.max(scan as u32)
    }

    // kernel/sched/fair.c: task_scan_max (a group scales it by its size and shared share)
    pub fn task_scan_max(&self, t: usize) -> u32 {
        let smin = self.task_scan_min(t);
        let smax = self.cfg.sysctl.numa_balancing_scan_period_max_ms as u64 / self.task_nr_scan_windows(t);
        let smax = smax.max(self.group_scan_scale(t, smax));
        (smin as u64).max(smax).min(u32::MAX as u64) as u32
    }

    /// The first scan period: task_scan_start (b5dd77c8bdad, 4.14), which without the group
    /// scaling (`numa-scan-group-scale` off) is task_scan_min, the first period before 4.14.
    // kernel/sched/fair.c: task_scan_start (not capped by task_scan_max)
    pub fn task_scan_start(&self, t: usize) -> u32 {
        let smin = self.task_scan_min(t) as u64;
        smin.max(self.group_scan_scale(t, smin)).min(u32::MAX as u64) as u32
    }

    /// Adapt the scan period to the locality of the last pass (spec §1.9). `shared` and
    /// `private` are the pass's memory faults of each kind.
    // kernel/sched/fair.c: update_task_scan_period
    pub fn update_task_scan_period(&mut self, t: usize, shared: u64, private: u64) {
        let [_, local, failed] = self.tasks[t].numa.faults_locality;
        // no local or shared faults, or a failed migration (4.0, 074c238177a7; recorded only
        // with numa-slowscan-on-migrate-fail): scan slower, and hold the whole mm back.
        // numa_faults_locality[] is not cleared on this path.
        if local + shared == 0 || failed > 0 {
            let p = &mut self.tasks[t].numa;
            p.scan_period = p.scan_period_max.min(p.scan_period.saturating_mul(2));
            let period = p.scan_period as u64;
            let mm = self.tasks[t].mm;
            self.mms[mm].numa_next_scan = self.now + period * NSEC_PER_MSEC;
            return;
        }
        let diff = match self.variants().update_task_scan_period {
            UpdateTaskScanPeriod::Base => self.scan_period_diff_v3_14(t, shared, private),
            UpdateTaskScanPeriod::V4_14 => self.scan_period_diff_v4_14(t, shared, private),
        };
        let period = self.tasks[t].numa.scan_period as i64;
        let (lo, hi) = (self.task_scan_min(t) as i64, self.task_scan_max(t) as i64);
        let p = &mut self.tasks[t].numa;
        p.scan_period = (period + diff).max(lo).min(hi.max(lo)) as u32;
        p.faults_locality = [0; 3];
    }

    /// One ratio: slow down when >= 70% of the faults were local; otherwise speed up, scaled
    /// by the private share (a mostly shared pass speeds up less).
    // a22b4b012340 (3.14): update_task_scan_period
    fn scan_period_diff_v3_14(&self, t: usize, shared: u64, private: u64) -> i64 {
        let p = &self.tasks[t].numa;
        let [remote, local, _] = p.faults_locality;
        let slot = (p.scan_period as u64).div_ceil(NUMA_PERIOD_SLOTS) as i64;
        let ratio = (local * NUMA_PERIOD_SLOTS / (local + remote).max(1)) as i64;
        let th = NUMA_PERIOD_THRESHOLD as i64;
        if ratio >= th {
            return (ratio - th).max(1) * slot;
        }
        let diff = -(th - ratio) * slot;
        let private_ratio = (private * NUMA_PERIOD_SLOTS).div_ceil(private + shared + 1) as i64;
        diff * private_ratio / NUMA_PERIOD_SLOTS as i64
    }

    /// Two ratios: slow down when >= 70% of the faults were private or >= 70% local (the
    /// source's comments name the branches the other way round; this is what runs); otherwise
    /// speed up by how far the larger ratio is below 70%.
    // 37ec97deb3a8 (4.14): update_task_scan_period
    fn scan_period_diff_v4_14(&self, t: usize, shared: u64, private: u64) -> i64 {
        let p = &self.tasks[t].numa;
        let [remote, local, _] = p.faults_locality;
        let slot = (p.scan_period as u64).div_ceil(NUMA_PERIOD_SLOTS) as i64;
        let lr_ratio = (local * NUMA_PERIOD_SLOTS / (local + remote).max(1)) as i64;
        let ps_ratio = (private * NUMA_PERIOD_SLOTS).checked_div(private + shared).unwrap_or(0) as i64;
        let th = NUMA_PERIOD_THRESHOLD as i64;
        if ps_ratio >= th {
            (ps_ratio - th).max(1) * slot
        } else if lr_ratio >= th {
            (lr_ratio - th).max(1) * slot
        } else {
            -(th - lr_ratio.max(ps_ratio)) * slot
        }
    }

    /// A task moved to another node by the scheduler: maybe scan fast again (spec §1.9). Before
    /// 4.19 only task_numa_migrate reset the period (`numa_migrate_reset_scan_period`).
    // 05cbdf4f5c19 (4.19): kernel/sched/fair.c: update_scan_period
    pub fn update_scan_period(&mut self, t: usize, new_cpu: usize) {
        if self.variants().update_scan_period == UpdateScanPeriod::Base {
            return;
        }
        let src = self.task_node(t);
        let dst = self.cpu_node(new_cpu);
        let p = &self.tasks[t].numa;
        if !self.numa_balancing() || p.faults.is_empty() || src == dst {
            return;
        }
        if p.scan_seq != 0 && (Some(dst) == p.preferred_nid || (p.preferred_nid.is_some() && Some(src) != p.preferred_nid)) {
            return;
        }
        self.tasks[t].numa.scan_period = self.task_scan_start(t);
    }

    /// Before 4.19, task_numa_migrate reset the period of a task it found a better CPU for, to
    /// recheck whether the move placed it well.
    // kernel/sched/fair.c: task_numa_migrate ("Reset the scan period if the task is being
    // rescheduled on an alternative node"), removed by 3f9672baaa4f (4.19)
    pub fn numa_migrate_reset_scan_period(&mut self, t: usize) {
        if self.variants().update_scan_period == UpdateScanPeriod::Base {
            self.tasks[t].numa.scan_period = self.task_scan_start(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::NSEC_PER_MSEC;
    use crate::testutil::{small_kernel, thread};

    /// kernel/sched/fair.c: task_scan_min/task_scan_max — worked numbers of spec §1.9.
    #[test]
    fn scan_period_bounds_follow_rss() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        k.mms[0].node_pages = std::array::from_fn(|n| if n == 0 { 262144 } else { 0 }); // 1 GiB -> 4 windows
        assert_eq!((k.task_scan_min(t), k.task_scan_max(t)), (250, 15000));
        k.mms[0].node_pages = std::array::from_fn(|n| if n == 0 { 262144 * 8 } else { 0 }); // 8 GiB -> 32 windows
        assert_eq!((k.task_scan_min(t), k.task_scan_max(t)), (100, 1875));
        // scan_period_min above scan_period_max (the kernel accepts it): max takes the min
        k.cfg.sysctl.numa_balancing_scan_period_min_ms = 204_800;
        assert_eq!((k.task_scan_min(t), k.task_scan_max(t)), (6400, 6400));
    }

    /// 37ec97deb3a8 (4.14): update_task_scan_period — failed migrations double the period (up
    /// to the max) and leave numa_faults_locality[] alone; private local faults slow scanning;
    /// shared remote faults speed it up.
    #[test]
    fn scan_period_adapts_to_locality() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        k.mms[0].node_pages = std::array::from_fn(|n| if n == 0 { 262144 } else { 0 });
        let p = &mut k.tasks[t].numa;
        p.scan_period = 1000;
        p.scan_period_max = 15000;
        p.faults_locality = [5, 5, 1];
        k.update_task_scan_period(t, 0, 10);
        assert_eq!(k.tasks[t].numa.scan_period, 2000);
        assert_eq!(k.tasks[t].numa.faults_locality, [5, 5, 1], "not cleared on the doubling path");

        k.tasks[t].numa.faults_locality = [0, 10, 0];
        k.update_task_scan_period(t, 0, 10); // ps_ratio 10 -> +3 slots of 200 ms
        assert_eq!(k.tasks[t].numa.scan_period, 2600);
        assert_eq!(k.tasks[t].numa.faults_locality, [0, 0, 0]);

        k.tasks[t].numa.faults_locality = [10, 0, 0];
        k.update_task_scan_period(t, 10, 0); // lr 0, ps 0 -> -7 slots of 260 ms
        assert_eq!(k.tasks[t].numa.scan_period, 2600 - 7 * 260);
    }

    /// a22b4b012340 (3.14; the 3.19 and 4.0 profiles): one local/remote ratio. A pass of 1
    /// local and 9 remote faults, 8 private and 2 shared: the 4.14 code slows down (private
    /// 80% >= 70%: +1 slot); the older code speeds up by 6 slots scaled by the private share
    /// ceil(80 / 11) = 8 tenths.
    #[test]
    fn scan_period_before_4_14_follows_locality_only() {
        for (version, expect) in [("3.19", 1000 - 600 * 8 / 10), ("6.12", 1000 + 100)] {
            let mut k = small_kernel(&format!("[kernel]\nversion = \"{version}\""));
            let t = thread(&k, 0);
            k.mms[0].node_pages = std::array::from_fn(|n| if n == 0 { 262144 } else { 0 });
            let p = &mut k.tasks[t].numa;
            p.scan_period = 1000;
            p.scan_period_max = 15000;
            p.faults_locality = [9, 1, 0];
            k.update_task_scan_period(t, 2, 8);
            assert_eq!(k.tasks[t].numa.scan_period, expect, "{version}");
        }
    }

    /// kernel/sched/fair.c: update_task_scan_period — `local + shared == 0` doubles the period
    /// and pushes the whole mm's next scan back by it: an empty fault buffer (a thread's first
    /// placement) and only private remote faults (migrated ones included: TNF_FAULT_LOCAL is
    /// set only for a page already local) both take that path. This is what paces
    /// numa01_THREAD_ALLOC's first phase-2 pass (docs/model.md, mthp-numa).
    #[test]
    fn no_local_or_shared_faults_double_the_period_and_delay_the_mm_scan() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        let mm = k.tasks[t].mm;
        k.now = 5 * NSEC_PER_MSEC * 1000;
        for (locality, private) in [([0, 0, 0], 0), ([10, 0, 0], 10)] {
            let p = &mut k.tasks[t].numa;
            p.scan_period = 1000;
            p.scan_period_max = 5000;
            p.faults_locality = locality;
            k.mms[mm].numa_next_scan = k.now;
            k.update_task_scan_period(t, 0, private);
            assert_eq!(k.tasks[t].numa.scan_period, 2000, "{locality:?}");
            assert_eq!(k.mms[mm].numa_next_scan, k.now + 2000 * NSEC_PER_MSEC, "{locality:?}");
        }
        // one local fault takes the adaptive path instead: no push
        k.tasks[t].numa.faults_locality = [9, 1, 0];
        k.mms[mm].numa_next_scan = k.now;
        k.update_task_scan_period(t, 0, 10);
        assert_eq!(k.mms[mm].numa_next_scan, k.now);
    }

    /// 05cbdf4f5c19 (4.19): a cross-node move resets the period to task_scan_start only when
    /// the task has not scanned yet or moves between nodes it does not prefer; before 4.19 a
    /// load-balancer move keeps it, and task_numa_migrate resets it instead.
    #[test]
    fn scan_period_reset_on_node_change_by_release() {
        for (version, reset_by_lb, reset_by_numa) in [("6.12", true, false), ("4.9", false, true)] {
            let mut k = small_kernel(&format!("[kernel]\nversion = \"{version}\""));
            let t = thread(&k, 0);
            crate::testutil::pin(&mut k, t, 0);
            k.tasks[t].numa.faults = vec![0; 16];
            k.tasks[t].numa.scan_period = 5000;
            let start = k.task_scan_start(t);
            k.update_scan_period(t, 2); // node 0 -> node 1, no pass yet
            assert_eq!(k.tasks[t].numa.scan_period == start, reset_by_lb, "{version}: load balancer");
            k.tasks[t].numa.scan_period = 5000;
            k.numa_migrate_reset_scan_period(t);
            assert_eq!(k.tasks[t].numa.scan_period == start, reset_by_numa, "{version}: task_numa_migrate");
        }
    }
}
