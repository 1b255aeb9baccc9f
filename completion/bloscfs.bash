# bash completion for bloscfs. Installed by make install; or source it.
_bloscfs() {
	local cur prev cmd i
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	cmd=
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		mount | unmount | stats | pack | unpack | info | verify | version | help)
			cmd=${COMP_WORDS[i]}
			break
			;;
		esac
	done
	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--help --version -o" -- "$cur"))
		elif ((COMP_CWORD == 1)); then
			COMPREPLY=($(compgen -W "mount unmount stats pack unpack info verify version help" -- "$cur") $(compgen -d -- "$cur"))
		else
			COMPREPLY=($(compgen -d -- "$cur"))
		fi
		return
	fi
	case $prev in
	--new-format) COMPREPLY=($(compgen -W "b2frame blp none" -- "$cur")); return ;;
	--format) COMPREPLY=($(compgen -W "b2frame blp b2nd" -- "$cur")); return ;;
	--codec) COMPREPLY=($(compgen -W "blosclz lz4 lz4hc zlib zstd" -- "$cur")); return ;;
	--filter) COMPREPLY=($(compgen -W "shuffle bitshuffle none delta,shuffle shuffle,bytedelta truncprec:16,shuffle" -- "$cur")); return ;;
	--checksum) COMPREPLY=($(compgen -W "None adler32 crc32 md5 sha1 sha224 sha256 sha384 sha512" -- "$cur")); return ;;
	--log) COMPREPLY=($(compgen -W "syslog stderr" -- "$cur") $(compgen -f -- "$cur")); return ;;
	-o | --options)
		COMPREPLY=($(compgen -W "ro rw allow_other nonempty noatime debug cache_size= read_ahead= new_format= log= fsname=" -- "$cur"))
		return
		;;
	--cache-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
	--s3-path-style) COMPREPLY=($(compgen -W "true false" -- "$cur")); return ;;
	--cache-size | --read-ahead | --chunk-size | --block-size | --clevel | --typesize | --chunkshape | --blockshape | --endpoint | --region | --request-timeout | --remote-cache-size | --dir-cache | --cache-dir-size) return ;;
	esac
	# The object-store flags: every command with s3:// locations takes
	# $conn, unpack and verify $read too, mount all three.
	local flags conn="--endpoint --s3-path-style --anonymous --region --request-timeout"
	local read="--remote-cache-size --cache-dir --cache-dir-size"
	case $cmd in
	mount) flags="--foreground -f --options -o --cache-size --read-ahead --read-only --log --debug -d --new-format --codec --clevel --filter --typesize --chunk-size $conn $read --dir-cache --help" ;;
	unmount) flags="--lazy -l --help" ;;
	stats) flags="--json --help" ;;
	info) flags="--json $conn --help" ;;
	verify) flags="--json $conn $read --help" ;;
	pack) flags="--format --chunkshape --blockshape --codec --clevel --filter --typesize --chunk-size --block-size --checksum --force -f --quiet -q $conn --help" ;;
	unpack) flags="--force -f --quiet -q $conn $read --help" ;;
	help) COMPREPLY=($(compgen -W "mount unmount stats pack unpack info verify version" -- "$cur")); return ;;
	*) flags="--help" ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
	elif [[ $cmd == mount || $cmd == unmount || $cmd == stats ]]; then
		COMPREPLY=($(compgen -d -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -F _bloscfs bloscfs
