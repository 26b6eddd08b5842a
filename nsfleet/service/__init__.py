"""The worker-side services both front ends call: the NameServer API, its route cache, the
fleet-wide NamesrvConfig, the acting-master rewrite and the expiry sweep."""
