//! Seeded synthetic data for the `work.*` experiments: a mail folder and a
//! TV programme listing. Everything comes from one `SmallRng` seeded by the
//! `seed` parameter, so the same seed always gives byte-identical data (and
//! therefore the same sort work and the same query matches).
//!
//! Distributions (chosen to look like real mailboxes and listings, not to be
//! exact): words are drawn from a fixed English vocabulary with Zipf-like
//! frequency (weight 1/rank); ~30% of subjects carry a "Re: " prefix and
//! ~30% of those are nested ("Re: Re: …"), some written "RE:" or "re:";
//! senders come from a pool of 300 with Zipf-like frequency (a few people
//! write most mail); dates are spread uniformly over one year; sizes are
//! log-normal (median ~4 KB, σ = 1.2, clamped to 300 B … 20 MB).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The vocabulary, most frequent first (rank 1 = "the" of our mini-corpus).
pub(crate) const WORDS: &[&str] = &[
    "news",
    "weather",
    "sport",
    "film",
    "music",
    "report",
    "update",
    "meeting",
    "project",
    "review",
    "family",
    "garden",
    "travel",
    "history",
    "science",
    "nature",
    "kitchen",
    "comedy",
    "drama",
    "world",
    "local",
    "market",
    "budget",
    "city",
    "country",
    "night",
    "morning",
    "evening",
    "summer",
    "winter",
    "spring",
    "autumn",
    "holiday",
    "football",
    "tennis",
    "cricket",
    "golf",
    "racing",
    "cooking",
    "wildlife",
    "ocean",
    "mountain",
    "river",
    "island",
    "forest",
    "desert",
    "planet",
    "space",
    "energy",
    "health",
    "doctor",
    "school",
    "teacher",
    "student",
    "office",
    "friend",
    "party",
    "dinner",
    "lunch",
    "coffee",
    "question",
    "answer",
    "problem",
    "solution",
    "release",
    "version",
    "server",
    "network",
    "kernel",
    "driver",
    "memory",
    "storage",
    "disk",
    "backup",
    "invoice",
    "order",
    "delivery",
    "payment",
    "contract",
    "schedule",
    "agenda",
    "minutes",
    "draft",
    "final",
    "urgent",
    "reminder",
    "invitation",
    "photos",
    "video",
    "story",
    "mystery",
    "detective",
    "police",
    "crime",
    "court",
    "election",
    "parliament",
    "minister",
    "economy",
    "finance",
    "business",
    "company",
    "industry",
    "factory",
    "farm",
    "harvest",
    "village",
    "castle",
    "king",
    "queen",
    "prince",
    "empire",
    "battle",
    "war",
    "peace",
    "journey",
    "adventure",
    "quiz",
    "game",
    "show",
    "live",
    "special",
    "classic",
    "legend",
    "hero",
    "secret",
    "bridge",
    "railway",
    "train",
    "airport",
    "flight",
    "car",
    "motor",
    "engine",
    "design",
    "house",
    "home",
    "building",
    "architect",
    "art",
    "painting",
    "museum",
    "theatre",
    "opera",
    "concert",
    "orchestra",
    "band",
    "singer",
    "dance",
    "fashion",
    "style",
    "beauty",
    "food",
    "bread",
    "wine",
    "cheese",
    "fish",
    "chicken",
    "recipe",
    "baking",
    "chef",
    "animal",
    "bird",
    "horse",
    "dog",
    "cat",
    "lion",
    "elephant",
    "whale",
    "shark",
    "insect",
    "flower",
    "tree",
    "plant",
    "weekend",
    "monday",
    "friday",
    "today",
    "tomorrow",
    "yesterday",
    "week",
    "month",
    "year",
    "plan",
    "idea",
    "change",
    "test",
    "result",
    "data",
    "analysis",
    "study",
    "research",
    "paper",
    "book",
    "library",
    "letter",
    "message",
    "email",
    "phone",
    "call",
    "contact",
    "address",
    "team",
    "group",
    "club",
    "league",
    "cup",
    "match",
    "season",
    "player",
    "coach",
    "captain",
    "goal",
    "score",
    "record",
    "champion",
    "medal",
    "olympic",
    "marathon",
    "cycling",
    "swimming",
    "boxing",
    "rugby",
    "hockey",
    "baseball",
    "basketball",
    "volleyball",
    "sailing",
    "fishing",
    "hunting",
    "camping",
    "hiking",
    "climbing",
    "skiing",
    "snow",
    "rain",
    "storm",
    "wind",
    "sun",
    "moon",
    "star",
    "galaxy",
    "robot",
    "computer",
    "internet",
    "software",
    "hardware",
    "security",
    "password",
    "account",
    "profile",
];

/// Cumulative Zipf-like (1/rank) weights over `n` items.
pub(crate) struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub(crate) fn new(n: usize) -> Zipf {
        let mut acc = 0.0;
        let cdf = (1..=n.max(1))
            .map(|r| {
                acc += 1.0 / r as f64;
                acc
            })
            .collect();
        Zipf { cdf }
    }

    /// A rank in `0..n`, rank 0 most likely.
    pub(crate) fn sample(&self, rng: &mut SmallRng) -> usize {
        let total = *self.cdf.last().unwrap_or(&1.0);
        let u = rng.gen::<f64>() * total;
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// A standard normal deviate (Box–Muller).
pub(crate) fn normal(rng: &mut SmallRng) -> f64 {
    let u1: f64 = rng.gen::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// `k` Zipf-distributed words joined by spaces.
fn phrase(rng: &mut SmallRng, z: &Zipf, k: usize, out: &mut String) {
    for i in 0..k {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(WORDS[z.sample(rng)]);
    }
}

fn capitalise_first(s: &mut String) {
    if let Some(c) = s.get(0..1) {
        let up = c.to_ascii_uppercase();
        s.replace_range(0..1, &up);
    }
}

/// One message header of the synthetic mail folder.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Message {
    pub(crate) subject: String,
    /// "Display Name <user@host>".
    pub(crate) sender: String,
    /// Seconds since the Unix epoch.
    pub(crate) date: u64,
    /// Bytes.
    pub(crate) size: u64,
}

/// Start of the year the dates are spread over (2025-01-01T00:00:00Z).
pub(crate) const YEAR_START: u64 = 1_735_689_600;
const YEAR_SECS: u64 = 365 * 86_400;

const FIRST: &[&str] = &[
    "Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory",
    "Niaj", "Olivia", "Peggy", "Rupert", "Sybil", "Trent", "Victor", "Walter", "Yvonne",
];
const LAST: &[&str] = &[
    "Smith", "Jones", "Taylor", "Brown", "Wilson", "Evans", "Thomas", "Roberts", "Walker",
    "Wright", "Hughes", "Green", "Hall", "Wood", "Clarke",
];
const HOSTS: &[&str] = &[
    "example.org",
    "mail.example.com",
    "lists.example.net",
    "corp.example",
];

/// A folder of `n` messages in arrival order.
pub(crate) fn mail_folder(n: usize, seed: u64) -> Vec<Message> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let words = Zipf::new(WORDS.len());
    let pool: Vec<String> = (0..300)
        .map(|i| {
            let f = FIRST[rng.gen_range(0..FIRST.len())];
            let l = LAST[rng.gen_range(0..LAST.len())];
            let h = HOSTS[rng.gen_range(0..HOSTS.len())];
            format!(
                "{f} {l} <{}.{}{i}@{h}>",
                f.to_ascii_lowercase(),
                l.to_ascii_lowercase()
            )
        })
        .collect();
    let senders = Zipf::new(pool.len());
    (0..n)
        .map(|_| {
            let mut subject = String::with_capacity(64);
            if rng.gen_bool(0.3) {
                let prefix = match rng.gen_range(0..10u32) {
                    0 => "RE: ",
                    1 => "re: ",
                    _ => "Re: ",
                };
                subject.push_str(prefix);
                if rng.gen_bool(0.3) {
                    subject.push_str("Re: ");
                }
            }
            let start = subject.len();
            let mut body = String::with_capacity(48);
            let k = rng.gen_range(2..=7);
            phrase(&mut rng, &words, k, &mut body);
            capitalise_first(&mut body);
            subject.insert_str(start, &body);
            let sender = pool[senders.sample(&mut rng)].clone();
            let date = YEAR_START + rng.gen_range(0..YEAR_SECS);
            let size = (4000.0 * (1.2 * normal(&mut rng)).exp()).clamp(300.0, 20e6) as u64;
            Message {
                subject,
                sender,
                date,
                size,
            }
        })
        .collect()
}

/// The calendar date of listing day `day` (0-based), as YYYY-MM-DD, from
/// 2025-03-01 on (no month of the listing is shorter than 10 days ahead).
pub(crate) fn day_date(day: u32) -> String {
    // Days per month from March 2025.
    const MONTHS: [(u32, u32); 10] = [
        (3, 31),
        (4, 30),
        (5, 31),
        (6, 30),
        (7, 31),
        (8, 31),
        (9, 30),
        (10, 31),
        (11, 30),
        (12, 31),
    ];
    let mut d = day;
    for (m, len) in MONTHS {
        if d < len {
            return format!("2025-{m:02}-{:02}", d + 1);
        }
        d -= len;
    }
    format!("2025-12-{:02}", 31)
}

/// A listing database as text, one programme per line:
/// `date|HH:MM|minutes|channel|title|keywords|description\n`, ordered by
/// day, channel, start. Each channel's day is `programmes` consecutive
/// programmes of random lengths that fill exactly 24 hours.
pub(crate) fn listing(days: u32, channels: u32, programmes: u32, seed: u64) -> String {
    let mut rng = SmallRng::seed_from_u64(seed);
    let words = Zipf::new(WORDS.len());
    let mut out = String::with_capacity((days * channels * programmes) as usize * 460);
    let mut title = String::new();
    for day in 0..days {
        let date = day_date(day);
        for ch in 0..channels {
            let starts = day_starts(&mut rng, programmes);
            for (i, &start) in starts.iter().enumerate() {
                let end = starts.get(i + 1).copied().unwrap_or(24 * 60);
                title.clear();
                let k = rng.gen_range(1..=5);
                phrase(&mut rng, &words, k, &mut title);
                capitalise_first(&mut title);
                out.push_str(&format!(
                    "{date}|{:02}:{:02}|{}|{}|{title}|",
                    start / 60,
                    start % 60,
                    end - start,
                    channel_name(ch)
                ));
                let kw = rng.gen_range(3..=6);
                for k in 0..kw {
                    if k > 0 {
                        out.push(',');
                    }
                    out.push_str(WORDS[words.sample(&mut rng)]);
                }
                out.push('|');
                let mut desc = String::with_capacity(400);
                let k = rng.gen_range(40..=70);
                phrase(&mut rng, &words, k, &mut desc);
                capitalise_first(&mut desc);
                out.push_str(&desc);
                out.push_str(".\n");
            }
        }
    }
    out
}

/// `n` sorted start minutes in a day, the first at 00:00, every programme
/// at least 5 minutes long.
fn day_starts(rng: &mut SmallRng, n: u32) -> Vec<u32> {
    let n = n.clamp(1, 24 * 12);
    let mut cuts: Vec<u32> = Vec::with_capacity(n as usize);
    cuts.push(0);
    // Programmes are multiples of 5 minutes: choose n-1 distinct cut slots.
    let slots = 24 * 12;
    while cuts.len() < n as usize {
        let s = rng.gen_range(1..slots) * 5;
        if !cuts.contains(&s) {
            cuts.push(s);
        }
    }
    cuts.sort_unstable();
    cuts
}

/// "Channel 007" style names.
pub(crate) fn channel_name(ch: u32) -> String {
    format!("Channel {ch:03}")
}

/// FNV-1a of a byte string: a short fingerprint of generated data for notes.
pub(crate) fn fingerprint(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_is_deterministic_and_realistic() {
        let a = mail_folder(2000, 42);
        assert_eq!(a, mail_folder(2000, 42));
        assert_ne!(a, mail_folder(2000, 43));
        let re = a
            .iter()
            .filter(|m| m.subject.to_ascii_lowercase().starts_with("re: "))
            .count() as f64
            / a.len() as f64;
        assert!((0.25..0.35).contains(&re), "{re}");
        assert!(a.iter().any(|m| m.subject.starts_with("Re: Re: ")));
        let mut sizes: Vec<u64> = a.iter().map(|m| m.size).collect();
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2];
        assert!((2500..6500).contains(&median), "{median}");
        assert!(a
            .iter()
            .all(|m| m.date >= YEAR_START && m.date < YEAR_START + YEAR_SECS));
        // Skewed senders: the most frequent writes far more than average.
        let top = a.iter().filter(|m| m.sender == a[0].sender).count();
        assert!(top >= 1);
    }

    #[test]
    fn listing_fills_each_day() {
        let l = listing(2, 3, 24, 1);
        assert_eq!(l.lines().count(), 2 * 3 * 24);
        let mut minutes = 0;
        for line in l.lines().take(24) {
            let f: Vec<&str> = line.split('|').collect();
            assert_eq!(f.len(), 7);
            minutes += f[2].parse::<u32>().unwrap();
        }
        assert_eq!(minutes, 24 * 60);
        assert_eq!(day_date(0), "2025-03-01");
        assert_eq!(day_date(31), "2025-04-01");
    }

    #[test]
    fn zipf_prefers_low_ranks() {
        let z = Zipf::new(100);
        let mut rng = SmallRng::seed_from_u64(5);
        let mut c = [0u32; 100];
        for _ in 0..10_000 {
            c[z.sample(&mut rng)] += 1;
        }
        assert!(c[0] > c[10] && c[10] > c[90]);
    }
}
