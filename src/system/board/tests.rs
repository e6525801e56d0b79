//! Tests of the board description, on fixture /proc and /sys trees.

use super::*;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

use crate::system::test_support::put;

/// A Rockchip-style big.LITTLE board (RK3399: 4× A53 + 2× A72), an eMMC,
/// an SD card, Wi-Fi on SDIO, two thermal zones and two USB disks — one
/// USB 3 stick on a USB 2 link.
fn board() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path().to_path_buf();
    put(
        &r,
        "sys/firmware/devicetree/base/model",
        "Pine64 RockPro64 v2.1\0",
    );
    put(
        &r,
        "sys/firmware/devicetree/base/compatible",
        "pine64,rockpro64-v2.1\0pine64,rockpro64\0rockchip,rk3399\0",
    );
    let mut info = String::new();
    for cpu in 0..6 {
        let (part, variant, rev) = if cpu < 4 {
            ("0xd03", "0x0", 4)
        } else {
            ("0xd08", "0x0", 2)
        };
        info.push_str(&format!(
                "processor\t: {cpu}\nBogoMIPS\t: 48.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid\n\
                 CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: {variant}\nCPU part\t: {part}\n\
                 CPU revision\t: {rev}\n\n"
            ));
    }
    put(&r, "proc/cpuinfo", &info);
    // Two clusters (policy0, policy4), two thermal zones with trip points.
    for (rel, text) in [
        (
            "sys/devices/system/cpu/cpufreq/policy0/related_cpus",
            "0 1 2 3\n",
        ),
        (
            "sys/devices/system/cpu/cpufreq/policy0/cpuinfo_max_freq",
            "1416000\n",
        ),
        (
            "sys/devices/system/cpu/cpufreq/policy4/related_cpus",
            "4 5\n",
        ),
        (
            "sys/devices/system/cpu/cpufreq/policy4/cpuinfo_max_freq",
            "1800000\n",
        ),
        ("sys/class/thermal/thermal_zone0/type", "cpu-thermal\n"),
        ("sys/class/thermal/thermal_zone0/temp", "47222\n"),
        (
            "sys/class/thermal/thermal_zone0/trip_point_0_temp",
            "70000\n",
        ),
        (
            "sys/class/thermal/thermal_zone0/trip_point_0_type",
            "passive\n",
        ),
        (
            "sys/class/thermal/thermal_zone0/trip_point_1_temp",
            "95000\n",
        ),
        (
            "sys/class/thermal/thermal_zone0/trip_point_1_type",
            "critical\n",
        ),
        ("sys/class/thermal/thermal_zone1/type", "gpu-thermal\n"),
        ("sys/class/thermal/thermal_zone1/temp", "45000\n"),
    ] {
        put(&r, rel, text);
    }
    // eMMC on mmc1 (with debugfs ios), SD card on mmc0 (no debugfs), SDIO Wi-Fi on mmc2.
    let emmc = "sys/bus/mmc/devices/mmc1:0001";
    put(&r, &format!("{emmc}/type"), "MMC\n");
    put(&r, &format!("{emmc}/name"), "AJTD4R\n");
    put(&r, &format!("{emmc}/manfid"), "0x000015\n");
    put(&r, &format!("{emmc}/date"), "06/2019\n");
    fs::create_dir_all(r.join(emmc).join("block/mmcblk1")).unwrap();
    put(
        &r,
        "sys/kernel/debug/mmc1/ios",
        "clock:\t\t200000000 Hz\nactual clock:\t200000000 Hz\nvdd:\t\t21 (3.3 ~ 3.4 V)\n\
             bus mode:\t2 (push-pull)\nchip select:\t0 (don't care)\npower mode:\t2 (on)\n\
             bus width:\t3 (8 bits)\ntiming spec:\t9 (mmc HS200)\nsignal voltage:\t1 (1.80 V)\n",
    );
    let sd = "sys/bus/mmc/devices/mmc0:aaaa";
    put(&r, &format!("{sd}/type"), "SD\n");
    put(&r, &format!("{sd}/name"), "SC32G\n");
    put(&r, &format!("{sd}/manfid"), "0x000003\n");
    fs::create_dir_all(r.join(sd).join("block/mmcblk0")).unwrap();
    put(&r, "sys/bus/mmc/devices/mmc2:0001/type", "SDIO\n");
    // USB: 2-1 is a USB 3.20 stick at 480 Mb/s (usb-storage), 4-1 a USB 3
    // disk at 5000 Mb/s (uas), 1-1 a USB 2 keyboard (hid).
    let usb = |dev: &str, version: &str, speed: &str, product: &str, driver: &str| {
        let d = format!("sys/bus/usb/devices/{dev}");
        put(&r, &format!("{d}/version"), &format!("{version}\n"));
        put(&r, &format!("{d}/speed"), &format!("{speed}\n"));
        put(&r, &format!("{d}/product"), &format!("{product}\n"));
        let i = format!("{d}:1.0");
        let class = if driver == "usbhid" { "03" } else { "08" };
        put(&r, &format!("{i}/bInterfaceClass"), &format!("{class}\n"));
        fs::create_dir_all(r.join(format!("sys/bus/usb/drivers/{driver}"))).unwrap();
        symlink(
            format!("../../../../sys/bus/usb/drivers/{driver}"),
            r.join(&i).join("driver"),
        )
        .unwrap();
    };
    usb("2-1", " 3.20", "480", "Ultra USB 3.0", "usb-storage");
    usb("4-1", " 3.10", "5000", "Portable SSD T7", "uas");
    usb("1-1", " 2.00", "12", "USB Keyboard", "usbhid");
    put(&r, "sys/bus/usb/devices/usb1/speed", "480\n");
    (dir, r)
}

#[test]
fn board_facts_from_a_fixture_tree() {
    let (_keep, root) = board();
    let mut f = Facts::default();
    collect(&root, &mut f);
    let get = |k: &str| {
        f.get(k)
            .unwrap_or_else(|| panic!("no {k}: {:#?}", f.0))
            .to_string()
    };
    assert_eq!(get("board.model"), "Pine64 RockPro64 v2.1");
    assert_eq!(
        get("board.compatible"),
        "pine64,rockpro64-v2.1, pine64,rockpro64, rockchip,rk3399"
    );
    assert_eq!(
        get("cpu0.core"),
        "ARM Cortex-A53 (implementer 0x41, part 0xd03, r0p4)"
    );
    assert_eq!(
        get("cpu5.core"),
        "ARM Cortex-A72 (implementer 0x41, part 0xd08, r0p2)"
    );
    assert_eq!(
        get("cpu.cluster.policy0"),
        "CPUs 0 1 2 3 (4 cores), max 1416 MHz, ARM Cortex-A53"
    );
    assert_eq!(
        get("cpu.cluster.policy4"),
        "CPUs 4 5 (2 cores), max 1800 MHz, ARM Cortex-A72"
    );
    assert_eq!(
        get("thermal.thermal_zone0"),
        "cpu-thermal: 47.2 °C; trips: passive 70.0 °C, critical 95.0 °C"
    );
    assert_eq!(
        get("thermal.thermal_zone1"),
        "gpu-thermal: 45.0 °C; no trip points"
    );
    assert_eq!(
            get("mmc.mmcblk1"),
            "mmcblk1: MMC \"AJTD4R\", Samsung (manfid 0x000015), made 06/2019, bus mmc HS200, 200 MHz, 8 bits"
        );
    assert_eq!(
            get("mmc.mmcblk0"),
            "mmcblk0: SD \"SC32G\", SanDisk (manfid 0x000003), bus mode not readable (needs root and debugfs)"
        );
    assert!(!f.0.iter().any(|x| x.value.contains("SDIO")));
    assert_eq!(
        get("usb.2-1.storage"),
        "Ultra USB 3.0: USB 3.20, link 480 Mb/s, driver usb-storage"
    );
    assert_eq!(
        get("usb.4-1.storage"),
        "Portable SSD T7: USB 3.10, link 5000 Mb/s, driver uas"
    );
    assert!(
        f.get("usb.1-1.storage").is_none(),
        "a keyboard is not storage"
    );
    assert_eq!(
        slow_usb3_links(&f),
        [("2-1".to_string(), "3.20".to_string(), 480)]
    );
}

#[test]
fn an_x86_or_empty_tree_gives_no_board_facts() {
    let dir = tempfile::tempdir().unwrap();
    put(
        dir.path(),
        "proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon\n\n",
    );
    let mut f = Facts::default();
    collect(dir.path(), &mut f);
    assert!(f.0.is_empty(), "{:#?}", f.0);
}

#[test]
fn core_names() {
    assert_eq!(core_name(0x41, 0xd05), "ARM Cortex-A55");
    assert_eq!(core_name(0x51, 0x801), "Qualcomm part 0x801");
    assert_eq!(core_name(0x99, 0x1), "implementer 0x99 part 0x001");
    assert_eq!(cpu_list("0-3,6"), [0, 1, 2, 3, 6]);
    assert_eq!(cpu_list("4 5\n"), [4, 5]);
}
