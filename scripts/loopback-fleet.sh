#!/usr/bin/env bash
# A throwaway fleet on this machine, to try `tunelab remote` without boards:
# an OpenSSH server on a loopback port with its own host and client keys,
# an ssh_config that uses them, and an Ansible inventory (INI and YAML)
# naming the server twice (two "boards"). Needs root (sshd) and
# openssh-server.
#
#   scripts/loopback-fleet.sh DIR        # start; prints what to pass to tunelab
#   kill "$(cat DIR/sshd.pid)"           # stop
set -euo pipefail
dir=${1:?usage: $0 DIR}
mkdir -p "$dir" /run/sshd
dir=$(cd "$dir" && pwd)
[ -f "$dir/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key"
[ -f "$dir/id" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/id"
cp "$dir/id.pub" "$dir/authorized_keys"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 2222)
cat > "$dir/sshd_config" <<CFG
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
PidFile $dir/sshd.pid
StrictModes no
UsePAM no
PermitRootLogin yes
PasswordAuthentication no
KbdInteractiveAuthentication no
CFG
cat > "$dir/ssh_config" <<CFG
Host *
  IdentityFile $dir/id
  UserKnownHostsFile $dir/known_hosts
  StrictHostKeyChecking accept-new
  User root
CFG
cat > "$dir/inventory.ini" <<CFG
[boards]
stb-1 ansible_host=127.0.0.1 tunelab_dir=$dir/stb-1
stb-2 ansible_host=localhost tunelab_dir=$dir/stb-2

[boards:vars]
ansible_port=$port
CFG
# The same fleet in Ansible's YAML inventory format.
cat > "$dir/inventory.yml" <<CFG
all:
  children:
    boards:
      hosts:
        stb-1:
          ansible_host: 127.0.0.1
          tunelab_dir: $dir/stb-1
        stb-2:
          ansible_host: localhost
          tunelab_dir: $dir/stb-2
      vars:
        ansible_port: $port
CFG
"$(command -v sshd || echo /usr/sbin/sshd)" -f "$dir/sshd_config"
echo "sshd listening on 127.0.0.1:$port (pid $(cat "$dir/sshd.pid" 2>/dev/null || echo '?'))"
echo "try: tunelab remote --inventory $dir/inventory.yml boards -o \"-F $dir/ssh_config\" -- inspect"
